#version 450
// Adam / AdamW with AMSGrad (max_exp_avg_sq state); the math is in adam_body.glsl.
#extension GL_GOOGLE_include_directive : require
#define AMSGRAD 1
#include "adam_body.glsl"

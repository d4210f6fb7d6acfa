#version 450
// Adam / AdamW without AMSGrad; the math is in adam_body.glsl.
#extension GL_GOOGLE_include_directive : require
#include "adam_body.glsl"

#version 450
// SGD with a momentum buffer; the math is in sgd_body.glsl.
#extension GL_GOOGLE_include_directive : require
#define MOMENTUM 1
#include "sgd_body.glsl"

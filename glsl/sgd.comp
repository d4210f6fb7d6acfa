#version 450
// Plain SGD (momentum = 0: no state); the math is in sgd_body.glsl.
#extension GL_GOOGLE_include_directive : require
#include "sgd_body.glsl"

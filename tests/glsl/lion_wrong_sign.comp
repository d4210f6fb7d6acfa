#version 450
// Deliberately wrong Lion (update sign flipped): check_rule must reject it.
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 1
#define VK_ADAM_HYPER_COUNT 4
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    vec4 u = sign(HYPER(1) * s[0] + (1.0 - HYPER(1)) * g);
    p += HYPER(0) * (u + HYPER(3) * p);
    s[0] = HYPER(2) * s[0] + (1.0 - HYPER(2)) * g;
}

#version 450
// Deliberately wrong Lion (update sign flipped; same interface as the real one):
// vk_adam.testing.check_rule must reject it.
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 1
#define VK_ADAM_HYPER_COUNT 6
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    vec4 u = sign(HYPER(1) * s[0] + HYPER(2) * g);
    p += HYPER(0) * (u + HYPER(5) * p);
    s[0] = HYPER(3) * s[0] + HYPER(4) * g;
}

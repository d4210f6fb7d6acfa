#version 450
// 4 + 4 * 40 = 164 bytes of push constants: more than the 128 Vulkan guarantees.
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 0
#define VK_ADAM_HYPER_COUNT 40
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    p -= HYPER(0) * g;
}

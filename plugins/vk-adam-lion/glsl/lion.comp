#version 450
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Alg. 2):
//   u = sign(beta1 * m + (1 - beta1) * g)
//   p = p - lr * (u + wd * p)
//   m = beta2 * m + (1 - beta2) * g
#extension GL_GOOGLE_include_directive : require
#define VK_ADAM_STATE_COUNT 1   // s[0] = exp_avg (m)
#define VK_ADAM_HYPER_COUNT 6
#include "vk_adam_rule.glsl"

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    // 1 - beta arrives from the host (float64, rounded once): 1.0 - 0.99 in float32 would be
    // off by 1e-6 relative.
    // A captured step (capturable=True) reads the lr from the device's clock when it runs; the
    // host then leaves HYPER(0) at zero (the rule's capturable_constants).
    const float lr = VK_ADAM_CAPTURABLE != 0u ? vk_adam_lr() : HYPER(0);
    const float beta1 = HYPER(1), one_minus_beta1 = HYPER(2);
    const float beta2 = HYPER(3), one_minus_beta2 = HYPER(4), wd = HYPER(5);
    vec4 u = sign(beta1 * s[0] + one_minus_beta1 * g);
    p -= lr * (u + wd * p);
    s[0] = beta2 * s[0] + one_minus_beta2 * g;
}

// Adam / AdamW (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019 for decoupled decay),
// in torch.optim.Adam/AdamW's single-tensor order (see README, "Update semantics").
// State: s[0] = exp_avg (m), s[1] = exp_avg_sq (v), s[2] = max_exp_avg_sq (AMSGrad only).
#extension GL_GOOGLE_include_directive : require
#ifdef AMSGRAD
#define VK_ADAM_STATE_COUNT 3
#else
#define VK_ADAM_STATE_COUNT 2
#endif
#define VK_ADAM_HYPER_COUNT 8
#include "vk_adam_rule.glsl"

layout(constant_id = 1) const float MAXIMIZE = 0.0;
layout(constant_id = 2) const float DECOUPLED_WEIGHT_DECAY = 0.0;

// Per-step values (host, float64, then float32):
//   push constants (capturable_constants() for captured steps, where noted)
//   0 lr / (1 - beta1^t)       captured: ln(beta1)
//   1 sqrt(1 - beta2^t)        captured: ln(beta2)
//   2 1 - beta1 (rounded once, from float64)
//   3 beta2
//   4 1 - beta2
//   5 eps
//   6 the coupled (L2) weight decay; 0 when decoupled
//   7 lr * weight_decay when decoupled, else 0    captured: weight_decay when decoupled, else 0
// A captured step computes its bias corrections from the device's clock (vk_adam_rule.glsl)
// with the lr of this step, in float32, as torch's capturable=True does on its device.
#define STEP_SIZE (VK_ADAM_CAPTURABLE != 0u ? vk_adam_lr() / vk_adam_one_minus_pow(HYPER(0), vk_adam_step()) : HYPER(0))
#define BIAS_CORRECTION2_SQRT (VK_ADAM_CAPTURABLE != 0u ? sqrt(vk_adam_one_minus_pow(HYPER(1), vk_adam_step())) : HYPER(1))
#define ONE_MINUS_BETA1 HYPER(2)
#define BETA2 HYPER(3)
#define ONE_MINUS_BETA2 HYPER(4)
#define EPS HYPER(5)
#define WEIGHT_DECAY HYPER(6)
#define DECOUPLED_DECAY (VK_ADAM_CAPTURABLE != 0u ? vk_adam_lr() * HYPER(7) : HYPER(7))

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    if (MAXIMIZE != 0.0) {
        g = -g;
    }
    // AdamW's p <- p * (1 - lr * wd) is folded into the final subtraction below, so p is
    // rounded once per step (rounding 1 - lr*wd to float32 first, as torch does, drifts by up
    // to 3e-8 relative per step). decay = 0 for Adam, whose L2 term goes into the gradient.
    vec4 decay = DECOUPLED_DECAY * p;
    if (DECOUPLED_WEIGHT_DECAY == 0.0) {
        g += WEIGHT_DECAY * p;             // Adam L2: g <- g + wd * p
    }
    // torch: exp_avg.lerp_(grad, 1 - beta1) = m + (1 - beta1) * (g - m)
    s[0] = s[0] + ONE_MINUS_BETA1 * (g - s[0]);
    s[1] = BETA2 * s[1] + ONE_MINUS_BETA2 * (g * g);
#ifdef AMSGRAD
    s[2] = max(s[2], s[1]);
    vec4 denom = sqrt(s[2]) / BIAS_CORRECTION2_SQRT + EPS;
#else
    vec4 denom = sqrt(s[1]) / BIAS_CORRECTION2_SQRT + EPS;
#endif
    p -= decay + STEP_SIZE * (s[0] / denom);
}

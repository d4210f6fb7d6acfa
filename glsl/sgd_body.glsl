// SGD with momentum, dampening, Nesterov and L2 weight decay, in torch.optim.SGD's order:
//   g <- -g (maximize); g <- g + wd * p
//   buf <- g on the first step, else buf <- momentum * buf + (1 - dampening) * g
//   g <- g + momentum * buf (Nesterov) or g <- buf
//   p <- p - lr * g
// State (momentum variant only): s[0] = momentum_buffer.
#extension GL_GOOGLE_include_directive : require
#ifdef MOMENTUM
#define VK_ADAM_STATE_COUNT 1
#else
#define VK_ADAM_STATE_COUNT 0
#endif
#define VK_ADAM_HYPER_COUNT 5
#include "vk_adam_rule.glsl"

layout(constant_id = 1) const float MAXIMIZE = 0.0;
layout(constant_id = 2) const float NESTEROV = 0.0;

// Push constants; a captured step takes the lr and the step from the device's clock instead
// (vk_adam_rule.glsl), and its capturable_constants() leave 0 and 4 at zero.
#define LR (VK_ADAM_CAPTURABLE != 0u ? vk_adam_lr() : HYPER(0))
#define WEIGHT_DECAY HYPER(1)
#define MOMENTUM_COEF HYPER(2)
#define ONE_MINUS_DAMPENING HYPER(3)
// 1.0 on the step that creates the momentum buffer (the first), else 0.0
#define FIRST_STEP (VK_ADAM_CAPTURABLE != 0u ? (vk_adam_step() == 1u ? 1.0 : 0.0) : HYPER(4))

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]) {
    if (MAXIMIZE != 0.0) {
        g = -g;
    }
    g += WEIGHT_DECAY * p;
#ifdef MOMENTUM
    if (FIRST_STEP != 0.0) {
        s[0] = g;
    } else {
        s[0] = MOMENTUM_COEF * s[0] + ONE_MINUS_DAMPENING * g;
    }
    if (NESTEROV != 0.0) {
        g = g + MOMENTUM_COEF * s[0];
    } else {
        g = s[0];
    }
#endif
    p -= LR * g;
}

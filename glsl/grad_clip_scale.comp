#version 450
// Pass 2 of global-norm gradient clipping: one workgroup sums every partial of pass 1 (all
// buffer sets of the optimizer) in a fixed order, and writes into the status buffer that every
// update shader reads (vk_adam_rule.glsl, binding 2):
//   grad_scale = min(1, max_norm / (norm + 1e-6))   (torch.nn.utils.clip_grad_norm_)
//   grad_norm  = norm                               (read back by opt.last_grad_norm())
//   skip       = 1 when the norm is not finite and skip_nonfinite is on
// so every rule, plugins included, gets clipping without changing its GLSL.
// Invocations per workgroup: 256, or what the host passes as constant 25 (the device's limit).
layout(local_size_x = 256, local_size_x_id = 25) in;
layout(constant_id = 0) const float SKIP_NONFINITE = 0.0;
layout(std430, set = 0, binding = 0) readonly buffer partials_block { float partials[]; };
layout(std430, set = 0, binding = 1) buffer status_block {
    uint skip;
    float grad_scale;
    float grad_norm;
} status;
layout(push_constant) uniform push_block { uint count; float max_norm; } pc;

shared float sums[gl_WorkGroupSize.x];

void main() {
    const uint t = gl_LocalInvocationID.x;
    float sum = 0.0;
    for (uint i = t; i < pc.count; i += gl_WorkGroupSize.x) {
        sum += partials[i];
    }
    sums[t] = sum;
    barrier();
    for (uint width = gl_WorkGroupSize.x / 2u; width > 0u; width >>= 1) {
        if (t < width) {
            sums[t] += sums[t + width];
        }
        barrier();
    }
    if (t == 0u) {
        const float norm = sqrt(sums[0]);
        const bool finite = !isnan(norm) && !isinf(norm);
        status.grad_norm = norm;
        status.grad_scale = min(1.0, pc.max_norm / (norm + 1e-6));
        if (SKIP_NONFINITE != 0.0) {
            status.skip = finite ? 0u : 1u;
        }
    }
}

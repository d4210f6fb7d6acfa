#version 450
// Pass 1 of global-norm gradient clipping (torch.nn.utils.clip_grad_norm_): each workgroup
// writes the sum of squares of its share of one gradient buffer to partials[offset + group].
// Deterministic: the share of each invocation depends only on n and the workgroup count (the
// host fixes both), and the workgroup sums in a fixed tree order, so the same gradients give
// the same partial sums bit for bit. A NaN or Inf gradient makes its partial non-finite, which
// is how one pass also serves skip_nonfinite.
#extension GL_GOOGLE_include_directive : require
#include "vk_adam_16bit.glsl"
// Invocations per workgroup: 256, or what the host passes as constant 25 (the device's limit).
layout(local_size_x = 256, local_size_x_id = 25) in;
// The gradient's format: 0 fp32, 1 fp16, 2 bf16 (16-bit values packed two per word).
layout(constant_id = 0) const uint GRAD_FORMAT = 0u;
layout(std430, set = 0, binding = 0) readonly buffer grad_block { float grad[]; };
layout(std430, set = 0, binding = 0) readonly buffer grad_words_block { uint grad_words[]; };
layout(std430, set = 0, binding = 1) writeonly buffer partials_block { float partials[]; };
layout(push_constant) uniform push_block { uint n; uint offset; } pc;

shared float sums[gl_WorkGroupSize.x];

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    float sum = 0.0;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        const float g = GRAD_FORMAT == 0u ? grad[i] : vk_adam_16_element(grad_words[i >> 1], i, GRAD_FORMAT);
        sum += g * g;
    }
    const uint t = gl_LocalInvocationID.x;
    sums[t] = sum;
    barrier();
    for (uint width = gl_WorkGroupSize.x / 2u; width > 0u; width >>= 1) {
        if (t < width) {
            sums[t] += sums[t + width];
        }
        barrier();
    }
    if (t == 0u) {
        partials[pc.offset + gl_WorkGroupID.x] = sums[0];
    }
}

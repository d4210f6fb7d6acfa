#version 450
// Sets status to 1 when any gradient element is NaN or +-Inf. Runs before the update
// dispatches when skip_nonfinite is on; the update shaders then return early (harness,
// binding 2), so a bad step changes neither params nor state, like torch's GradScaler skip.
#extension GL_GOOGLE_include_directive : require
#include "vk_adam_16bit.glsl"
// Invocations per workgroup: 256, or what the host passes as constant 25 (the device's limit).
layout(local_size_x = 256, local_size_x_id = 25) in;
// The gradient's format: 0 fp32, 1 fp16, 2 bf16 (16-bit values packed two per word).
layout(constant_id = 0) const uint GRAD_FORMAT = 0u;
layout(std430, set = 0, binding = 0) readonly buffer grad_block { float grad[]; };
layout(std430, set = 0, binding = 0) readonly buffer grad_words_block { uint grad_words[]; };
layout(std430, set = 0, binding = 1) buffer status_block { uint status; };
layout(push_constant) uniform push_block { uint n; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    bool bad = false;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        // Exponent bits all ones = Inf or NaN; a bit test survives fast-math compilers.
        const float g = GRAD_FORMAT == 0u ? grad[i] : vk_adam_16_element(grad_words[i >> 1], i, GRAD_FORMAT);
        bad = bad || ((floatBitsToUint(g) & 0x7f800000u) == 0x7f800000u);
    }
    if (bad) {
        status = 1u;  // benign race: every writer stores the same value
    }
}

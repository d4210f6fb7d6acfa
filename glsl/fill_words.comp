#version 450
// dst[at + i] = 0 for i < count, in 4-byte words: clearing the gradient buffers ZeRO-1's NCCL
// path has read (zero_grad), written only, where a copy from a zero buffer would read as much.
// Invocations per workgroup: 256, or what the host passes as constant 25 (the device's limit).
layout(local_size_x = 256, local_size_x_id = 25) in;
layout(std430, set = 0, binding = 0) writeonly buffer dst_block { uint dst[]; };
layout(push_constant) uniform push_block { uint at; uint count; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
        dst[pc.at + i] = 0u;
    }
}

#version 450
// dst[dst_at + i] = src[src_at + i] for i < count, in 4-byte words: the byte-range copies
// between device buffers of ZeRO-1's NCCL path. A compute copy, because vkCmdCopyBuffer ran
// far below the memory bandwidth on the GPUs measured.
// Invocations per workgroup: 256, or what the host passes as constant 25 (the device's limit).
layout(local_size_x = 256, local_size_x_id = 25) in;
layout(std430, set = 0, binding = 0) readonly buffer src_block { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer dst_block { uint dst[]; };
layout(push_constant) uniform push_block { uint src_at; uint dst_at; uint count; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
        dst[pc.dst_at + i] = src[pc.src_at + i];
    }
}

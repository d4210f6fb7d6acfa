#version 450
// dst = src, 16 bytes per invocation and loop trip: the copy-bandwidth yardstick that
// `vk-adam bench` measures the update shaders against, on the same device and driver.
// Invocations per workgroup: 256, or what the host passes as constant 25 (the device's limit).
layout(local_size_x = 256, local_size_x_id = 25) in;
layout(std430, set = 0, binding = 0) readonly buffer src_block { vec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer dst_block { vec4 dst[]; };
layout(push_constant) uniform push_block { uint n_vec4; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n_vec4; i += stride) {
        dst[i] = src[i];
    }
}

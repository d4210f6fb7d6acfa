#version 450
// z = y * y over n floats: reads what saxpy.comp wrote, so a barrier must come between them.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer y_block { float y[]; };
layout(std430, set = 0, binding = 1) writeonly buffer z_block { float z[]; };
layout(push_constant) uniform push_block { float unused; uint n; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        z[i] = y[i] * y[i];
    }
}

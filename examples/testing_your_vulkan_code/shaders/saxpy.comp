#version 450
// y = a * x + y over n floats. The grid may be smaller than n (it is capped by the device's
// workgroup-count limit), so each invocation strides over the rest.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer x_block { float x[]; };
layout(std430, set = 0, binding = 1) buffer y_block { float y[]; };
layout(push_constant) uniform push_block { float a; uint n; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        y[i] = pc.a * x[i] + y[i];
    }
}

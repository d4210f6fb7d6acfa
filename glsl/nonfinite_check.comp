#version 450
// Sets status to 1 when any gradient element is NaN or +-Inf. Runs before the update
// dispatches when skip_nonfinite is on; the update shaders then return early (harness,
// binding 2), so a bad step changes neither params nor state, like torch's GradScaler skip.
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer grad_block { float grad[]; };
layout(std430, set = 0, binding = 1) buffer status_block { uint status; };
layout(push_constant) uniform push_block { uint n; } pc;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    bool bad = false;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        // Exponent bits all ones = Inf or NaN; a bit test survives fast-math compilers.
        bad = bad || ((floatBitsToUint(grad[i]) & 0x7f800000u) == 0x7f800000u);
    }
    if (bad) {
        status = 1u;  // benign race: every writer stores the same value
    }
}

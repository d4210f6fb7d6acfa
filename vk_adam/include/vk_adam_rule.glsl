// vk-adam update-rule harness: every rule shader (built-in or plugin) includes this file.
//
// The buffer interface, the same for every rule:
//   binding 0          param   fp32, updated in place
//   binding 1          grad    fp32, read (and zeroed when VK_ADAM_ZERO_GRAD is set)
//   binding 2          status  { uint skip; float grad_scale; }: skip != 0 skips the step (the
//                      non-finite check sets it); every gradient is multiplied by grad_scale
//                      (1.0, or the global-norm clipping factor written on the device)
//   binding 3 .. 3+K-1 the rule's K state buffers, fp32, in the order the rule declares them
// Push constants: uint n (element count), then VK_ADAM_HYPER_COUNT floats (the rule's per-step
// values, packed on the host in float64 and rounded once to float32).
// Specialization constant 0 is VK_ADAM_ZERO_GRAD; a rule's own constants start at id 1.
//
// Before including, define VK_ADAM_STATE_COUNT (0..4) and VK_ADAM_HYPER_COUNT (>= 1).
// After including, define
//   void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS])
// GLSL arithmetic is component-wise, so one vec4 function serves the vectorised body
// and the scalar tail (n not a multiple of 4) alike.
#ifndef VK_ADAM_STATE_COUNT
#error "define VK_ADAM_STATE_COUNT before including vk_adam_rule.glsl"
#endif
#ifndef VK_ADAM_HYPER_COUNT
#error "define VK_ADAM_HYPER_COUNT before including vk_adam_rule.glsl"
#endif
#if VK_ADAM_STATE_COUNT > 0
#define VK_ADAM_STATE_SLOTS VK_ADAM_STATE_COUNT
#else
#define VK_ADAM_STATE_SLOTS 1
#endif

layout(local_size_x = 256) in;
layout(constant_id = 0) const float VK_ADAM_ZERO_GRAD = 1.0;

// Each buffer is declared twice on one binding: as vec4 (16-byte loads for the body) and as
// float (the last n % 4 elements, so buffers of any length work without padding).
#define VK_ADAM_BUFFER(B, NAME) \
    layout(std430, set = 0, binding = B) buffer NAME##_vec4_block { vec4 NAME##_v4[]; }; \
    layout(std430, set = 0, binding = B) buffer NAME##_float_block { float NAME##_f[]; };

VK_ADAM_BUFFER(0, param)
VK_ADAM_BUFFER(1, grad)
layout(std430, set = 0, binding = 2) readonly buffer status_block {
    uint vk_adam_skip_step;
    float vk_adam_grad_scale;
};
#if VK_ADAM_STATE_COUNT > 0
VK_ADAM_BUFFER(3, state0)
#endif
#if VK_ADAM_STATE_COUNT > 1
VK_ADAM_BUFFER(4, state1)
#endif
#if VK_ADAM_STATE_COUNT > 2
VK_ADAM_BUFFER(5, state2)
#endif
#if VK_ADAM_STATE_COUNT > 3
VK_ADAM_BUFFER(6, state3)
#endif
#if VK_ADAM_STATE_COUNT > 4
#error "vk_adam_rule.glsl supports at most 4 state buffers"
#endif

layout(push_constant) uniform vk_adam_push_block {
    uint n;
    float hyper[VK_ADAM_HYPER_COUNT];
} vk_adam_pc;

// The rule's per-step value k (0-based), as packed by its push_constants().
#define HYPER(k) vk_adam_pc.hyper[k]

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]);

void main() {
    if (vk_adam_skip_step != 0u) {
        return;
    }
    const uint n = vk_adam_pc.n;
    const uint n_vec4 = n >> 2;
    // Grid-stride loop: the host caps the workgroup count (maxComputeWorkGroupCount[0] is
    // 65535 on many drivers), so any n up to 2^31 is covered by one dispatch.
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    const uint first = gl_GlobalInvocationID.x;
    for (uint i = first; i < n_vec4; i += stride) {
        vec4 p = param_v4[i];
        vec4 s[VK_ADAM_STATE_SLOTS];
        s[0] = vec4(0.0);
#if VK_ADAM_STATE_COUNT > 0
        s[0] = state0_v4[i];
#endif
#if VK_ADAM_STATE_COUNT > 1
        s[1] = state1_v4[i];
#endif
#if VK_ADAM_STATE_COUNT > 2
        s[2] = state2_v4[i];
#endif
#if VK_ADAM_STATE_COUNT > 3
        s[3] = state3_v4[i];
#endif
        vk_adam_update(p, grad_v4[i] * vk_adam_grad_scale, s);
        param_v4[i] = p;
        if (VK_ADAM_ZERO_GRAD != 0.0) {
            grad_v4[i] = vec4(0.0);
        }
#if VK_ADAM_STATE_COUNT > 0
        state0_v4[i] = s[0];
#endif
#if VK_ADAM_STATE_COUNT > 1
        state1_v4[i] = s[1];
#endif
#if VK_ADAM_STATE_COUNT > 2
        state2_v4[i] = s[2];
#endif
#if VK_ADAM_STATE_COUNT > 3
        state3_v4[i] = s[3];
#endif
    }
    // Scalar tail: the last n % 4 elements, one per invocation of the first workgroup.
    if (first < (n & 3u)) {
        const uint j = (n_vec4 << 2) + first;
        vec4 p = vec4(param_f[j]);
        vec4 s[VK_ADAM_STATE_SLOTS];
        s[0] = vec4(0.0);
#if VK_ADAM_STATE_COUNT > 0
        s[0] = vec4(state0_f[j]);
#endif
#if VK_ADAM_STATE_COUNT > 1
        s[1] = vec4(state1_f[j]);
#endif
#if VK_ADAM_STATE_COUNT > 2
        s[2] = vec4(state2_f[j]);
#endif
#if VK_ADAM_STATE_COUNT > 3
        s[3] = vec4(state3_f[j]);
#endif
        vk_adam_update(p, vec4(grad_f[j] * vk_adam_grad_scale), s);
        param_f[j] = p.x;
        if (VK_ADAM_ZERO_GRAD != 0.0) {
            grad_f[j] = 0.0;
        }
#if VK_ADAM_STATE_COUNT > 0
        state0_f[j] = s[0].x;
#endif
#if VK_ADAM_STATE_COUNT > 1
        state1_f[j] = s[1].x;
#endif
#if VK_ADAM_STATE_COUNT > 2
        state2_f[j] = s[2].x;
#endif
#if VK_ADAM_STATE_COUNT > 3
        state3_f[j] = s[3].x;
#endif
    }
}

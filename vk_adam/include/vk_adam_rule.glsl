// vk-adam update-rule harness: every rule shader (built-in or plugin) includes this file.
//
// A rule writes only its math, on fp32 values:
//   void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS])
// The harness loads, converts and stores everything around it, so every rule gets every
// storage format (vk_adam/_formats.py is the host side) without changing its GLSL:
//   params and gradients  fp32, or fp16 / bf16 packed two per 32-bit word; a 16-bit param either
//                         has an fp32 master copy (the rule updates the master; the param is its
//                         nearest-even rounding) or takes the update by stochastic rounding
//   each state buffer     fp32, bf16 (nearest-even), or 8-bit blockwise: four codes per word into
//                         a dynamic map (signed, or unsigned for non-negative state), one fp32
//                         absmax per block of 256 values. The harness dequantizes before
//                         vk_adam_update and quantizes after it with the block's new absmax.
//
// The buffer interface, the same for every rule (K = VK_ADAM_STATE_COUNT):
//   binding 0              param (format above), updated in place
//   binding 1              grad (the param's format), read; zeroed when VK_ADAM_ZERO_GRAD is set
//   binding 2              status { uint skip; float grad_scale; }: skip != 0 skips the step (the
//                          non-finite check sets it); every gradient is multiplied by grad_scale
//                          (1.0, or the global-norm clipping factor written on the device)
//   bindings 3 .. 3+K-1    the rule's K state buffers, in the order the rule declares them
//   bindings 3+K .. 3+2K-1 the fp32 absmax per block of each 8-bit state buffer (else unused)
//   binding 3+2K           the fp32 master copy of a 16-bit param; with VK_ADAM_PARAM_OUT, the
//                          device's copy of an fp32 param (else unused)
//   binding 4+2K           the quantization tables of 8-bit state (else unused; _formats.py)
// Push constants: uint n (element count), VK_ADAM_HYPER_COUNT floats (the rule's per-step values,
// packed on the host in float64 and rounded once to float32), then uint rng_key (the step's key
// of the stochastic-rounding stream).
// Specialization constants: 0 is VK_ADAM_ZERO_GRAD; a rule's own constants take ids 1..15;
// 16..21 are the storage formats below, 22..25 the loop's shape (vk_adam/_optim/variants.py; 25 is
// the workgroup size, 256 unless the host picks another for a loop that allows it); 26 is
// VK_ADAM_PARAM_OUT; 27..30 the step clock of captured steps (below).
//
// Captured steps (an optimizer made with capturable=True builds its pipelines with
// VK_ADAM_CAPTURABLE = 1): a recorded step may be evaluated any number of times, so nothing that
// changes from step to step is a push constant. The push constants carry what stays constant
// (the rule's capturable_constants(), and the stochastic-rounding stream's base key); the step
// number and the group's lr come from the clock in the status buffer, read when the step runs:
//   vk_adam_step()  the 1-based step being taken (the device's count of steps taken, plus one)
//   vk_adam_lr()    the group's lr for this step (set by the host, or an on-device schedule)
// and the step itself advances the count (vk_adam_clock_tick), unless the step was skipped.
// A rule's shader tells the two modes apart with `if (VK_ADAM_CAPTURABLE != 0u)` (a constant the
// driver folds: the other branch costs nothing).
//
// Before including, define VK_ADAM_STATE_COUNT (0..4) and VK_ADAM_HYPER_COUNT (>= 1).
// GLSL arithmetic is component-wise, so one vec4 function serves every element; the last
// vec4 of a buffer whose length is not a multiple of 4 is read and written lane by lane.
#ifndef VK_ADAM_STATE_COUNT
#error "define VK_ADAM_STATE_COUNT before including vk_adam_rule.glsl"
#endif
#ifndef VK_ADAM_HYPER_COUNT
#error "define VK_ADAM_HYPER_COUNT before including vk_adam_rule.glsl"
#endif
#if VK_ADAM_STATE_COUNT > 4
#error "vk_adam_rule.glsl supports at most 4 state buffers"
#endif
#if VK_ADAM_STATE_COUNT > 0
#define VK_ADAM_STATE_SLOTS VK_ADAM_STATE_COUNT
#else
#define VK_ADAM_STATE_SLOTS 1
#endif
#define VK_ADAM_HARNESS_VERSION 11
// The version as a specialization constant the host never supplies: its SpecId in the SPIR-V
// tells the registry which harness a shader was built against (11: one rounding hash per two
// values; 10: an entry for every float's top 16 bits, the signed map's by ordered bits). A shader
// of an earlier version would round with another stream than the host's reference, or read this
// table wrongly, so it is refused.
layout(constant_id = 31) const uint VK_ADAM_HARNESS = 11u;
// Loops the driver unrolls once the specialization constants that bound them are known.
#extension GL_EXT_control_flow_attributes : enable
// The subgroup variant (compiled with -DVK_ADAM_SUBGROUPS; vk_adam.shaderc builds it next to
// the base variant as <name>.subgroups.spv): 8-bit state reduces each block's absmax with
// subgroupMax instead of shared-memory atomics and barriers. The host runs it only on devices
// whose compute stage supports subgroup arithmetic, with subgroups of 8, 16, 32 or 64 lanes.
#ifdef VK_ADAM_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

// Invocations per workgroup: 256, or what the host passes as constant 25 (64..1024) for the loops
// that take any size (no 8-bit state, or the subgroup variant's); the base variant's 8-bit loop
// and its shared block maxima assume 256, and the host keeps 256 for it.
layout(local_size_x = 256, local_size_x_id = 25) in;
layout(constant_id = 0) const float VK_ADAM_ZERO_GRAD = 1.0;
// Storage formats (uint bit patterns; _formats.py): param 0 fp32, 1 fp16, 2 bf16; mode 0 plain,
// 1 fp32 master copy, 2 stochastic rounding; state 0 fp32, 1 bf16, 2 int8 signed, 3 unsigned.
layout(constant_id = 16) const uint VK_ADAM_PARAM_FORMAT = 0u;
layout(constant_id = 17) const uint VK_ADAM_PARAM_MODE = 0u;
layout(constant_id = 18) const uint VK_ADAM_STATE0_FORMAT = 0u;
layout(constant_id = 19) const uint VK_ADAM_STATE1_FORMAT = 0u;
layout(constant_id = 20) const uint VK_ADAM_STATE2_FORMAT = 0u;
layout(constant_id = 21) const uint VK_ADAM_STATE3_FORMAT = 0u;
// 8-bit state: vec4s per invocation per tile, 1 or 2 (the host's default: 1); in the subgroup
// variant, blocks per subgroup per iteration (1 or 2).
layout(constant_id = 22) const uint VK_ADAM_INT8_VEC4S = 1u;
// No 8-bit state: vec4s per invocation per tile, 1, 2 or 4 ($VK_ADAM_VEC4S; default 1).
layout(constant_id = 23) const uint VK_ADAM_VEC4S = 1u;
// fp32 params only: 1 reads the param from the master binding (the device's copy) and writes it
// to both, the param binding being only written (an optimizer with device_params=True writes
// each step's params straight into the host arrays it imported).
layout(constant_id = 26) const uint VK_ADAM_PARAM_OUT = 0u;
#ifdef VK_ADAM_SUBGROUPS
// The device's subgroup size (8, 16, 32 or 64), as the host read it from the device.
layout(constant_id = 24) const uint VK_ADAM_SUBGROUP_SIZE = 32u;
#endif

// Each buffer is declared under several views on one binding: vec4 (16-byte loads), float
// (lane by lane), uvec2 (four 16-bit values), uint (four 8-bit codes).
#define VK_ADAM_BUFFER(B, NAME) \
    layout(std430, set = 0, binding = B) buffer NAME##_vec4_block { vec4 NAME##_v4[]; }; \
    layout(std430, set = 0, binding = B) buffer NAME##_float_block { float NAME##_f[]; }; \
    layout(std430, set = 0, binding = B) buffer NAME##_uvec2_block { uvec2 NAME##_u2[]; }; \
    layout(std430, set = 0, binding = B) buffer NAME##_uint_block { uint NAME##_u[]; };

VK_ADAM_BUFFER(0, param)
VK_ADAM_BUFFER(1, grad)
layout(push_constant) uniform vk_adam_push_block {
    uint n;
    float hyper[VK_ADAM_HYPER_COUNT];
    uint rng_key;
} vk_adam_pc;

// The rule's per-step value k (0-based), as packed by its push_constants()
// (captured steps: capturable_constants()).
#define HYPER(k) vk_adam_pc.hyper[k]

layout(std430, set = 0, binding = 2) readonly buffer status_block {
    uint vk_adam_skip_step;
    float vk_adam_grad_scale;
};

// -- the step clock of captured steps (harness version 7) -----------------------------------------
// The status buffer's words (vk_adam/_optim/clock.py lays them out): 0 skip, 1 gradient scale,
// 2 last norm, 3..7 unused; then 8 words per param group at VK_ADAM_CLOCK_GROUP (lr, and the
// on-device schedule: kind, warmup, total, origin, two settings); then two words per update
// dispatch of a step at VK_ADAM_CLOCK_COUNT: its count of finished workgroups, R, and of
// finished workgroups of the steps that wrapped R around, H (see vk_adam_clock_read).
layout(constant_id = 27) const uint VK_ADAM_CAPTURABLE = 0u;
layout(constant_id = 28) const uint VK_ADAM_CLOCK_GROUP = 8u;
layout(constant_id = 29) const uint VK_ADAM_CLOCK_COUNT = 16u;
// The chunk's offset in its buffer's stochastic-rounding stream (as uint: offset * stride).
layout(constant_id = 30) const uint VK_ADAM_RNG_OFFSET = 0u;
layout(std430, set = 0, binding = 2) buffer vk_adam_clock_block {
    uint vk_adam_clock_words[];
};
// Schedule kinds (vk_adam/_optim/clock.py): the lr as set, or a vk_adam.schedules formula.
#define VK_ADAM_SCHEDULE_NONE 0u
#define VK_ADAM_SCHEDULE_CONSTANT 1u
#define VK_ADAM_SCHEDULE_LINEAR_WARMUP 2u
#define VK_ADAM_SCHEDULE_LINEAR_DECAY 3u
#define VK_ADAM_SCHEDULE_COSINE 4u

// This step's values, read from the clock once at the start of main() (captured steps only).
uint vk_adam_clock_step = 0u;
float vk_adam_clock_lr = 0.0;
uint vk_adam_clock_rng_key = 0u;
bool vk_adam_clock_wraps = false;

// The 1-based step being taken, and the group's lr for it (captured steps; see the top).
uint vk_adam_step() { return vk_adam_clock_step; }
float vk_adam_lr() { return vk_adam_clock_lr; }

// 1 - base^t for 0 < base < 1, from log_base = ln(base) (the host's, float64 rounded once): a
// bias correction. 1 - pow(base, t) in float32 would lose the digits that matter (1 - 0.999 keeps
// 4 of them); the series of -expm1(t * ln base) keeps float32's relative precision. Both forms
// are computed and one selected: no branch on a value read from memory, so the clock's loads
// overlap the step's first loads of its tile.
float vk_adam_one_minus_pow(float log_base, uint t) {
    const float x = float(t) * log_base;
    // -expm1(x) = -x (1 + x/2 (1 + x/3 (1 + ... (1 + x/10)))), |x| <= 0.5: |term| < 3e-10
    float e = 1.0;
    [[unroll]] for (int k = 10; k >= 2; k--) {
        e = 1.0 + x * (1.0 / float(k)) * e;
    }
    return mix(-x * e, 1.0 - exp(x), x < -0.5);
}

// cos(x) to float32 precision for any x >= 0 (GLSL's cos guarantees only 2^-11 absolute): reduced
// to [0, pi], then -sin(x - pi/2) by its series (|y| <= pi/2: the last term dropped < 1e-9).
float vk_adam_cos(float x) {
    const float two_pi = 6.28318530717958648;
    x = x - two_pi * floor(x / two_pi);
    x = mix(x, two_pi - x, x > 3.14159265358979324);
    const float y = x - 1.57079632679489662;
    const float y2 = y * y;
    float s = 1.0;
    [[unroll]] for (int k = 13; k >= 3; k -= 2) {
        s = 1.0 - y2 * (1.0 / float(k * (k - 1))) * s;
    }
    return -y * s;
}

// The lr of the group for step `step` from its clock words: vk_adam.schedules' formulas, in
// the same order, of the schedule's own step (step - origin). Every formula is computed and the
// kind's selected (mix with a bool is a select: a formula not taken cannot leak a NaN), with no
// branch on the words read, as above.
float vk_adam_scheduled_lr(uint step) {
    const uint g = VK_ADAM_CLOCK_GROUP;
    const float lr = uintBitsToFloat(vk_adam_clock_words[g]);
    const uint kind = vk_adam_clock_words[g + 1u];
    const float warmup = float(vk_adam_clock_words[g + 2u]);
    const float total = float(vk_adam_clock_words[g + 3u]);
    const float s = float(max(int(step) - int(vk_adam_clock_words[g + 4u]), 0));
    const float a = uintBitsToFloat(vk_adam_clock_words[g + 5u]);  // start factor, or cycles
    const float b = uintBitsToFloat(vk_adam_clock_words[g + 6u]);  // the cosine's final ratio
    const float ramp = s / max(1.0, warmup);
    const float start = a + (1.0 - a) * s / max(1.0, warmup);
    const float linear = max(0.0, (total - s) / max(1.0, total - warmup));
    const float progress = (s - warmup) / max(1.0, total - warmup);
    const float c = 0.5 * (1.0 + vk_adam_cos(3.14159265358979324 * a * 2.0 * progress));
    const float cosine = max(0.0, c * (1.0 - b) + b);
    float f = mix(cosine, linear, kind == VK_ADAM_SCHEDULE_LINEAR_DECAY);
    f = mix(f, 1.0, kind == VK_ADAM_SCHEDULE_CONSTANT);
    f = mix(f, ramp, s < warmup);
    f = mix(f, mix(start, 1.0, s >= warmup), kind == VK_ADAM_SCHEDULE_LINEAR_WARMUP);
    f = mix(f, 1.0, kind == VK_ADAM_SCHEDULE_NONE);
    return lr * f;
}

// The mixing hash of the stochastic-rounding stream (below), declared early for the clock.
uint vk_adam_mix32(uint x);

// Read this step's values from the clock (every invocation, before its loop).
//
// The count of steps taken needs no pass of its own and no atomic that returns a value: every
// workgroup of the dispatch adds 1 to R when it is done (vk_adam_clock_tick), so after step t,
// R = t * P (P = gl_NumWorkGroups.x, a power of two the host picks, clock.py), and while step t + 1
// runs R = t * P + k with k < P (this workgroup has not added its 1 yet): R / P = t whenever any
// workgroup of the step reads it, in whatever order they run. R counts modulo 2^32; in the step
// after which it wraps around to 0 every workgroup also adds 1 to H, which counts those wraps the
// same way, so the count is (H / P) * 2^32 / P + R / P, exact up to 2^32 steps.
void vk_adam_clock_read() {
    const uint shift = uint(findLSB(gl_NumWorkGroups.x));  // P = 2^shift
    const uint low = vk_adam_clock_words[VK_ADAM_CLOCK_COUNT] >> shift;
    const uint high = vk_adam_clock_words[VK_ADAM_CLOCK_COUNT + 1u] >> shift;
    vk_adam_clock_wraps = low == (0xFFFFFFFFu >> shift);
    vk_adam_clock_step = ((high << (31u - shift)) << 1u) + low + 1u;
    vk_adam_clock_lr = vk_adam_scheduled_lr(vk_adam_clock_step);
    // vk_adam._formats.step_key's last round and offset_key, on the device: the push constant
    // carries the buffer's base key (the rounds of the seed and buffer index).
    vk_adam_clock_rng_key = vk_adam_mix32(vk_adam_pc.rng_key + vk_adam_clock_step) + VK_ADAM_RNG_OFFSET;
}

// Count this workgroup's part of the step (see vk_adam_clock_read): after every invocation of
// the workgroup has read the clock, one non-returning atomic add; a skipped step (the skip flag,
// stable while the update runs) counts nothing. Called by every invocation, in uniform control
// flow. The barrier after the step makes the counts visible to the next step's reads.
void vk_adam_clock_tick() {
    barrier();  // every invocation of this workgroup has read the clock
    if (gl_LocalInvocationIndex != 0u || vk_adam_skip_step != 0u) return;
    atomicAdd(vk_adam_clock_words[VK_ADAM_CLOCK_COUNT], 1u);
    if (vk_adam_clock_wraps) {
        atomicAdd(vk_adam_clock_words[VK_ADAM_CLOCK_COUNT + 1u], 1u);
    }
}

VK_ADAM_BUFFER(3 + 2 * VK_ADAM_STATE_COUNT, master)
layout(std430, set = 0, binding = 4 + 2 * VK_ADAM_STATE_COUNT) readonly buffer qtable_block {
    uint vk_adam_tables[];
};

void vk_adam_update(inout vec4 p, vec4 g, inout vec4 s[VK_ADAM_STATE_SLOTS]);

// -- 16-bit conversions, bit-exact with NumPy / ml_dtypes (nearest-even) -----------------------

#include "vk_adam_16bit.glsl"

uint vk_adam_f16_nearest(float f) {
    uint u = floatBitsToUint(f);
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7FFFFFFFu;
    if (a >= 0x47800000u) {  // >= 65536, inf or NaN
        return sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
    }
    if (a < 0x38800000u) {  // below 2^-14: a float16 subnormal (or zero)
        if (a <= 0x33000000u) {  // at most 2^-25: rounds to zero (the tie goes to even 0)
            return sign;
        }
        uint shift = 126u - (a >> 23);  // 14..24: significand bits below 2^-24
        uint mant = (a & 0x7FFFFFu) | 0x800000u;
        uint q = mant >> shift;
        uint rem = mant & ((1u << shift) - 1u);
        uint half_ulp = 1u << (shift - 1u);
        if (rem > half_ulp || (rem == half_ulp && (q & 1u) != 0u)) {
            q += 1u;
        }
        return sign | q;
    }
    a += 0xC8000FFFu + ((a >> 13) & 1u);  // exponent -112, then round to nearest even
    return sign | (a >> 13);
}

uint vk_adam_f16_stochastic(float f, uint r) {
    uint u = floatBitsToUint(f);
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7FFFFFFFu;
    // Fast path, 2^-14 <= |f| < inf (a normal float16 or an overflow): add random bits below
    // the float16 ulp, shift, and the exponent's rebias (127 - 15 = 112) falls out as one
    // subtraction; a carry into the exponent is the round-up. One add and one shift per value
    // instead of unpacking and a variable shift.
    if (a - 0x38800000u < 0x7F800000u - 0x38800000u) {
        return sign | min(((a + (r & 0x1FFFu)) >> 13) - 0x1C000u, 0x7C00u);
    }
    if (a >= 0x7F800000u) {
        return sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
    }
    if (a < 0x00800000u) {
        return sign;
    }
    int e = int(a >> 23) - 127;
    uint mant = (a & 0x7FFFFFu) | 0x800000u;
    uint drop = uint(clamp(13 + max(0, -14 - e), 13, 31));  // bits below the float16 ulp
    uint kept = (mant + (r & ((1u << drop) - 1u))) >> drop;
    uint h = e >= -14 ? (uint(e + 14) << 10) + kept : kept;
    return sign | min(h, 0x7C00u);
}

uint vk_adam_bf16_nearest(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7F800000u) == 0x7F800000u) {  // inf, NaN (kept quiet)
        return (u >> 16) | ((u & 0xFFFFu) != 0u ? 0x40u : 0u);
    }
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

uint vk_adam_bf16_stochastic(float f, uint r) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7F800000u) == 0x7F800000u) {
        return u >> 16;
    }
    return (u + (r & 0xFFFFu)) >> 16;
}

// fp16 roundings of vec4s (below): one test and one branch per vec4 for the rare values
// (subnormal, inf, NaN) that take the exact slow paths, the four common values by their fast
// paths. A branch per value costs more than the conversion it guards; a param is rarely off the
// fast paths, so the branch is rarely taken (measured: benchmarks/h200/format_costs.py).

// Four halves (two words, the first in the low bits) to fp32, exactly. The device's conversion
// (unpackHalf2x16) is exact for every half but the subnormals, which a device may flush to zero
// unless the shader runs under DenormPreserve (Vulkan's precision rules). So each word is also
// converted with bit 10 of both halves set: a half whose exponent field is 0 (zero or subnormal,
// m * 2^-24) becomes the normal half +-2^-14 (1 + m / 1024), and |that| - 2^-14 = m * 2^-24 is an
// exact float subtraction (zero, or a normal fp32 value); the half's sign is put back by its bit.
// The first conversion picks which: below 2^-14 it is such a half, flushed or not. Mostly
// float instructions: the integer ones bind the 8-bit rows (on an H100, fp16 params (SR) with
// int8 state 0.976x the time of the conversion by bits at 2^28;
// results/h100-2026-12-07-f16-select2). NaN stays NaN; its payload is the device's.
vec4 vk_adam_f16x4_to_f32(uvec2 w) {
    const vec4 converted = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    const vec4 lifted = vec4(unpackHalf2x16(w.x | 0x04000400u), unpackHalf2x16(w.y | 0x04000400u));
    const vec4 small = uintBitsToFloat(floatBitsToUint(abs(lifted) - 6.103515625e-05)
                                       | (floatBitsToUint(lifted) & 0x80000000u));
    return mix(converted, small, lessThan(abs(converted), vec4(6.103515625e-05)));
}

vec4 vk_adam_unpack4(uvec2 w, uint fmt) {
    if (fmt == 2u) {  // bf16: the upper half of an fp32, one shift or mask per value
        return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u));
    }
    return vk_adam_f16x4_to_f32(w);
}

uvec2 vk_adam_pack4_nearest(vec4 v, uint fmt) {
    uvec4 h;
    if (fmt == 1u) {
        const uvec4 u = floatBitsToUint(v);
        const uvec4 a = u & 0x7FFFFFFFu;
        // All four round to a normal half (2^-14 <= |v| < 65520): each is rounded to nearest
        // even in its fp32 bits (the 13 bits below the half's ulp cleared), which leaves a
        // value the half holds exactly, and the device's conversion packs it. A conversion of a
        // value its format holds is exact in any rounding mode, so this needs none, and it
        // takes fewer integer instructions than forming the half's bits (which bind the 8-bit
        // rows; results/h100-2026-12-07-f16-pack). (No carry reaches the sign: |v| < 65520.)
        if (all(lessThan(a - 0x38800000u, uvec4(0x477FF000u - 0x38800000u)))) {
            const vec4 r = uintBitsToFloat((u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);
            return uvec2(packHalf2x16(r.xy), packHalf2x16(r.zw));
        } else {
            h = uvec4(vk_adam_f16_nearest(v.x), vk_adam_f16_nearest(v.y), vk_adam_f16_nearest(v.z),
                      vk_adam_f16_nearest(v.w));
        }
    } else {
        h = uvec4(vk_adam_bf16_nearest(v.x), vk_adam_bf16_nearest(v.y), vk_adam_bf16_nearest(v.z),
                  vk_adam_bf16_nearest(v.w));
    }
    return uvec2(h.x | (h.y << 16), h.z | (h.w << 16));
}

// The stochastic-rounding stream: a counter-based hash of (step key, element index). Element i
// rounds with 16 bits of the hash of its pair's first element, i & ~1: the low half for even i,
// the high half for odd i. Rounding to bf16 drops 16 bits and to fp16 13 (normal values), so
// one hash serves two values: half the integer work of a hash per value, which the 8-bit rows
// with stochastic rounding are bound by (a hash per value took 1.02-1.03x the time of those
// rows on an H100: results/h100-2026-12-07-hash). An fp16 value below 2^-17 drops more than 16
// bits: its random bits above the 16 are its own element's hash (the exact path only).
uint vk_adam_mix32(uint x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

uvec2 vk_adam_pack4_stochastic(vec4 v, uint fmt, uint first) {
    const uint key = VK_ADAM_CAPTURABLE != 0u ? vk_adam_clock_rng_key : vk_adam_pc.rng_key;
    const uint h0 = vk_adam_mix32(key + first * 0x9E3779B9u);  // elements first and first + 1
    const uint h1 = vk_adam_mix32(key + (first + 2u) * 0x9E3779B9u);
    const uvec4 r = uvec4(h0, h0 >> 16, h1, h1 >> 16);  // the fast paths read the low 16 bits
    uvec4 h;
    if (fmt == 1u) {
        const uvec4 u = floatBitsToUint(v);
        // 2^-14 <= |v| <= 65504 for all four: vk_adam_f16_stochastic's fast path, as in
        // vk_adam_pack4_nearest: the random bits added below the half's ulp in the fp32 bits,
        // those bits cleared, and the device's exact conversion of the result (the largest half
        // cannot round past itself, nor carry into the sign). Tested on the float (no integer
        // work: the 8-bit rows are bound by integer instructions; results/h100-2026-12-07-grid).
        if (all(greaterThanEqual(abs(v), vec4(6.103515625e-05)))
            && all(lessThanEqual(abs(v), vec4(65504.0)))) {
            const vec4 t = uintBitsToFloat((u + (r & 0x1FFFu)) & 0xFFFFE000u);
            return uvec2(packHalf2x16(t.xy), packHalf2x16(t.zw));
        } else {
            uvec4 w;  // up to 31 random bits: the element's own hash above the pair's 16
            for (uint l = 0u; l < 4u; l++) {
                w[l] = (r[l] & 0xFFFFu) | (vk_adam_mix32(key + (first + l) * 0x9E3779B9u) << 16);
            }
            h = uvec4(vk_adam_f16_stochastic(v.x, w.x), vk_adam_f16_stochastic(v.y, w.y),
                      vk_adam_f16_stochastic(v.z, w.z), vk_adam_f16_stochastic(v.w, w.w));
        }
    } else {
        h = uvec4(vk_adam_bf16_stochastic(v.x, r.x), vk_adam_bf16_stochastic(v.y, r.y),
                  vk_adam_bf16_stochastic(v.z, r.z), vk_adam_bf16_stochastic(v.w, r.w));
    }
    return uvec2(h.x | (h.y << 16), h.z | (h.w << 16));
}

// -- 8-bit blockwise state --------------------------------------------------------------------
// The quantization-table buffer that vk_adam/_formats.py builds (quant_tables; 514 KiB): the 256
// values of the signed map, the unsigned map's 256, then per map one word per value of a float's
// top 16 bits (65,536 entries: every float has one; signed map first). A value's code is its
// nearest map value's: the code at the lower edge of its entry's span of floats, plus one at or
// past the span's one decision threshold (rounded to 1/256 of the span, 2**-15 relative;
// _formats._codes_of_normalized is the same rule). The entry holds the code in bits 16..23 and
// 0x10000 - threshold below them, less the span's own top bits: adding the value's bits gives
// the code, the low 16 bits reaching the threshold carrying one into it. So the lookup is one
// read, one add and one shift per value, with no clamp (an entry for every float: tiny values,
// values past 2, inf and NaN included) and, in the signed map, no mirroring of negative values:
// their bits are first made to grow with the value (the sign's 31 bits below it flipped), so
// the codes of the whole signed map grow with its index as the unsigned map's do. The entries
// are read in place, through the L1 cache: copying them into shared memory per workgroup costs
// more than it saves. The 2 x 256 map values, read once per value loaded, are copied into shared
// memory when a workgroup starts (2 KiB, one barrier): a dequantizing read then costs a
// shared-memory read instead of a scattered read of the table buffer. The measurements:
// benchmarks/h200/format_costs.py.

#define VK_ADAM_SIGNED_ENTRIES 512u
#define VK_ADAM_UNSIGNED_ENTRIES (512u + 65536u)
// Block maxima: two banks (see main()) x 4 state buffers x 8 blocks per tile x 8 partial
// maxima. Invocation lid adds to partial lid % 8 of its block, so at most 4 lanes of a 32-wide
// subgroup contend for one address (not 32); readers take the max of the 8 partials.
#define VK_ADAM_PARTIALS 8u
#ifndef VK_ADAM_SUBGROUPS
shared uint vk_adam_block_max[2][64 * VK_ADAM_STATE_SLOTS];
#endif

// The code of x (a value over its block's absmax): in the unsigned map, its entry by its bits
// (a negative value's, -0.0's too, is code 0's); in the signed map, by its ordered bits.
uint vk_adam_quantize(float x, bool signed_map) {
    uint bits = floatBitsToUint(x);
    if (!signed_map) {
        return (vk_adam_tables[VK_ADAM_UNSIGNED_ENTRIES + (bits >> 16)] + bits) >> 16;
    }
    bits ^= uint(floatBitsToInt(x) >> 31) & 0x7FFFFFFFu;
    return (vk_adam_tables[VK_ADAM_SIGNED_ENTRIES + (bits >> 16)] + bits) >> 16;
}

// The map values (signed at 0, unsigned at 256), copied from the table buffer by main().
shared float vk_adam_map_values[512];

void vk_adam_load_map_values() {
    for (uint w = gl_LocalInvocationIndex; w < 512u; w += gl_WorkGroupSize.x) {
        vk_adam_map_values[w] = uintBitsToFloat(vk_adam_tables[w]);
    }
    barrier();
}

float vk_adam_dequantize(uint c, bool signed_map) {
    return vk_adam_map_values[(signed_map ? 0u : 256u) + c];
}

vec4 vk_adam_dequantize4(uint w, float amax, bool signed_map) {
    return amax * vec4(vk_adam_dequantize(w & 0xFFu, signed_map), vk_adam_dequantize((w >> 8) & 0xFFu, signed_map),
                       vk_adam_dequantize((w >> 16) & 0xFFu, signed_map), vk_adam_dequantize(w >> 24, signed_map));
}

uint vk_adam_quantize4(vec4 s, float amax, bool signed_map) {
    float inv = amax > 0.0 ? 1.0 / amax : 0.0;
    return vk_adam_quantize(s.x * inv, signed_map) | (vk_adam_quantize(s.y * inv, signed_map) << 8)
        | (vk_adam_quantize(s.z * inv, signed_map) << 16) | (vk_adam_quantize(s.w * inv, signed_map) << 24);
}

// -- one state buffer: its views, its absmax, load and store by format --------------------------

#define VK_ADAM_STATE(K, FMT)                                                                      \
    VK_ADAM_BUFFER(3 + K, state##K)                                                                \
    layout(std430, set = 0, binding = 3 + VK_ADAM_STATE_COUNT + K) buffer absmax##K##_block {      \
        float absmax##K[];                                                                         \
    };                                                                                             \
    vec4 vk_adam_load_state##K(uint i, uint n) {                                                   \
        if (FMT == 0u) {                                                                           \
            if (4u * i + 4u <= n) return state##K##_v4[i];                                         \
            vec4 v = vec4(0.0);                                                                    \
            for (uint l = 0u; 4u * i + l < n; l++) v[l] = state##K##_f[4u * i + l];                \
            return v;                                                                              \
        }                                                                                          \
        if (FMT == 1u) return vk_adam_unpack4(state##K##_u2[i], 2u);                               \
        return vk_adam_dequantize4(state##K##_u[i], absmax##K[i >> 6], FMT == 2u);                 \
    }                                                                                              \
    void vk_adam_store_state##K(uint i, uint n, vec4 s, float amax, bool block_leader) {           \
        if (FMT == 0u) {                                                                           \
            if (4u * i + 4u <= n) {                                                                \
                state##K##_v4[i] = s;                                                              \
            } else {                                                                               \
                for (uint l = 0u; 4u * i + l < n; l++) state##K##_f[4u * i + l] = s[l];            \
            }                                                                                      \
        } else if (FMT == 1u) {                                                                    \
            state##K##_u2[i] = vk_adam_pack4_nearest(s, 2u);                                       \
        } else {                                                                                   \
            state##K##_u[i] = vk_adam_quantize4(s, amax, FMT == 2u);                               \
            if (block_leader) absmax##K[i >> 6] = amax;                                            \
        }                                                                                          \
    }

#if VK_ADAM_STATE_COUNT > 0
VK_ADAM_STATE(0, VK_ADAM_STATE0_FORMAT)
#endif
#if VK_ADAM_STATE_COUNT > 1
VK_ADAM_STATE(1, VK_ADAM_STATE1_FORMAT)
#endif
#if VK_ADAM_STATE_COUNT > 2
VK_ADAM_STATE(2, VK_ADAM_STATE2_FORMAT)
#endif
#if VK_ADAM_STATE_COUNT > 3
VK_ADAM_STATE(3, VK_ADAM_STATE3_FORMAT)
#endif

uint vk_adam_state_format(uint k) {
    return k == 0u ? VK_ADAM_STATE0_FORMAT
        : k == 1u ? VK_ADAM_STATE1_FORMAT
        : k == 2u ? VK_ADAM_STATE2_FORMAT : VK_ADAM_STATE3_FORMAT;
}

// -- params and gradients -----------------------------------------------------------------------

// fp32 buffers (param, grad, state) may be the application's, exactly n floats long: the last,
// partial vec4 goes lane by lane. Packed 16- and 8-bit buffers are vk-adam's, padded to whole
// vec4s (8-bit state to whole blocks).
vec4 vk_adam_load_param(uint i, uint n) {
    if (VK_ADAM_PARAM_FORMAT == 0u && VK_ADAM_PARAM_OUT != 0u) return master_v4[i];  // padded
    if (VK_ADAM_PARAM_MODE == 1u) {
        // The master copy, except where the 16-bit param is no longer its rounding: there the
        // param was changed since the last step (by the application, or a loaded checkpoint)
        // and that value wins.
        vec4 m = master_v4[i];
        uvec2 w = param_u2[i];
        uvec2 r = vk_adam_pack4_nearest(m, VK_ADAM_PARAM_FORMAT);
        if (w != r) {
            vec4 q = vk_adam_unpack4(w, VK_ADAM_PARAM_FORMAT);
            uvec4 hw = uvec4(w.x & 0xFFFFu, w.x >> 16, w.y & 0xFFFFu, w.y >> 16);
            uvec4 hr = uvec4(r.x & 0xFFFFu, r.x >> 16, r.y & 0xFFFFu, r.y >> 16);
            for (uint l = 0u; l < 4u; l++) {
                if (hw[l] != hr[l]) m[l] = q[l];
            }
        }
        return m;
    }
    if (VK_ADAM_PARAM_FORMAT != 0u) return vk_adam_unpack4(param_u2[i], VK_ADAM_PARAM_FORMAT);
    if (4u * i + 4u <= n) return param_v4[i];
    vec4 v = vec4(0.0);
    for (uint l = 0u; 4u * i + l < n; l++) v[l] = param_f[4u * i + l];
    return v;
}

void vk_adam_store_param(uint i, uint n, vec4 p) {
    if (VK_ADAM_PARAM_FORMAT == 0u) {
        if (VK_ADAM_PARAM_OUT != 0u) master_v4[i] = p;
        if (4u * i + 4u <= n) {
            param_v4[i] = p;
        } else {
            for (uint l = 0u; 4u * i + l < n; l++) param_f[4u * i + l] = p[l];
        }
        return;
    }
    if (VK_ADAM_PARAM_MODE == 1u) master_v4[i] = p;
    param_u2[i] = VK_ADAM_PARAM_MODE == 2u ? vk_adam_pack4_stochastic(p, VK_ADAM_PARAM_FORMAT, 4u * i)
                                           : vk_adam_pack4_nearest(p, VK_ADAM_PARAM_FORMAT);
}

vec4 vk_adam_load_grad(uint i, uint n) {
    if (VK_ADAM_PARAM_FORMAT != 0u) return vk_adam_unpack4(grad_u2[i], VK_ADAM_PARAM_FORMAT);
    if (4u * i + 4u <= n) return grad_v4[i];
    vec4 v = vec4(0.0);
    for (uint l = 0u; 4u * i + l < n; l++) v[l] = grad_f[4u * i + l];
    return v;
}

void vk_adam_zero_grad(uint i, uint n) {
    if (VK_ADAM_PARAM_FORMAT != 0u) {
        grad_u2[i] = uvec2(0u);
    } else if (4u * i + 4u <= n) {
        grad_v4[i] = vec4(0.0);
    } else {
        for (uint l = 0u; 4u * i + l < n; l++) grad_f[4u * i + l] = 0.0;
    }
}

// The largest |lane| over the lanes that hold elements (< n), as ordered uint bits.
uint vk_adam_abs_max_bits(vec4 s, uint i, uint n) {
    vec4 a = abs(s);
    float m = 0.0;
    for (uint l = 0u; l < 4u; l++) {
        if (4u * i + l < n) m = max(m, a[l]);
    }
    return floatBitsToUint(m);
}

// Whether any state buffer is 8-bit (a specialization constant: the driver compiles only one
// of the two loop shapes below), and how many vec4s each invocation takes per tile.
#if VK_ADAM_STATE_COUNT == 0
const bool VK_ADAM_ANY_INT8 = false;
#elif VK_ADAM_STATE_COUNT == 1
const bool VK_ADAM_ANY_INT8 = VK_ADAM_STATE0_FORMAT >= 2u;
#elif VK_ADAM_STATE_COUNT == 2
const bool VK_ADAM_ANY_INT8 = VK_ADAM_STATE0_FORMAT >= 2u || VK_ADAM_STATE1_FORMAT >= 2u;
#elif VK_ADAM_STATE_COUNT == 3
const bool VK_ADAM_ANY_INT8 =
    VK_ADAM_STATE0_FORMAT >= 2u || VK_ADAM_STATE1_FORMAT >= 2u || VK_ADAM_STATE2_FORMAT >= 2u;
#else
const bool VK_ADAM_ANY_INT8 = VK_ADAM_STATE0_FORMAT >= 2u || VK_ADAM_STATE1_FORMAT >= 2u
    || VK_ADAM_STATE2_FORMAT >= 2u || VK_ADAM_STATE3_FORMAT >= 2u;
#endif

// Load, update (the rule's vk_adam_update), and store one vec4 i with its state S (vec4[]).
#if VK_ADAM_STATE_COUNT > 0
#define VK_ADAM_LOAD_STATE0(S, i) S[0] = vk_adam_load_state0(i, n);
#define VK_ADAM_STORE_STATE0(S, i, A) vk_adam_store_state0(i, n, S[0], A[0], leader);
#else
#define VK_ADAM_LOAD_STATE0(S, i)
#define VK_ADAM_STORE_STATE0(S, i, A)
#endif
#if VK_ADAM_STATE_COUNT > 1
#define VK_ADAM_LOAD_STATE1(S, i) S[1] = vk_adam_load_state1(i, n);
#define VK_ADAM_STORE_STATE1(S, i, A) vk_adam_store_state1(i, n, S[1], A[1], leader);
#else
#define VK_ADAM_LOAD_STATE1(S, i)
#define VK_ADAM_STORE_STATE1(S, i, A)
#endif
#if VK_ADAM_STATE_COUNT > 2
#define VK_ADAM_LOAD_STATE2(S, i) S[2] = vk_adam_load_state2(i, n);
#define VK_ADAM_STORE_STATE2(S, i, A) vk_adam_store_state2(i, n, S[2], A[2], leader);
#else
#define VK_ADAM_LOAD_STATE2(S, i)
#define VK_ADAM_STORE_STATE2(S, i, A)
#endif
#if VK_ADAM_STATE_COUNT > 3
#define VK_ADAM_LOAD_STATE3(S, i) S[3] = vk_adam_load_state3(i, n);
#define VK_ADAM_STORE_STATE3(S, i, A) vk_adam_store_state3(i, n, S[3], A[3], leader);
#else
#define VK_ADAM_LOAD_STATE3(S, i)
#define VK_ADAM_STORE_STATE3(S, i, A)
#endif

#define VK_ADAM_LOAD_AND_UPDATE(P, S, i)                                         \
    P = vec4(0.0);                                                               \
    S[0] = vec4(0.0);                                                            \
    if (i < n_vec4) {                                                            \
        VK_ADAM_LOAD_STATE0(S, i)                                                \
        VK_ADAM_LOAD_STATE1(S, i)                                                \
        VK_ADAM_LOAD_STATE2(S, i)                                                \
        VK_ADAM_LOAD_STATE3(S, i)                                                \
        P = vk_adam_load_param(i, n);                                            \
        vk_adam_update(P, vk_adam_load_grad(i, n) * vk_adam_grad_scale, S);     \
    }

#define VK_ADAM_STORE_PARAM(P, i)                                                \
    if (i < n_vec4) {                                                            \
        vk_adam_store_param(i, n, P);                                            \
        if (VK_ADAM_ZERO_GRAD != 0.0) vk_adam_zero_grad(i, n);                   \
    }

#define VK_ADAM_STORE_STATES(S, i, A)                                            \
    if (i < n_vec4) {                                                            \
        VK_ADAM_STORE_STATE0(S, i, A)                                            \
        VK_ADAM_STORE_STATE1(S, i, A)                                            \
        VK_ADAM_STORE_STATE2(S, i, A)                                            \
        VK_ADAM_STORE_STATE3(S, i, A)                                            \
    }

#define VK_ADAM_STORE(P, S, i, A)                                                \
    VK_ADAM_STORE_STATES(S, i, A)                                                \
    VK_ADAM_STORE_PARAM(P, i)

#ifndef VK_ADAM_SUBGROUPS
// The first of the partial maxima of state buffer k's block that this invocation's vec4 in
// half `half` of the tile belongs to.
#define vk_adam_block_slot(k, half) (64u * (k) + 32u * (half) + 8u * (lid >> 6))

float vk_adam_block_absmax(uint bank, uint slot) {
    uint m = 0u;
    for (uint q = 0u; q < VK_ADAM_PARTIALS; q++) m = max(m, vk_adam_block_max[bank][slot + q]);
    return uintBitsToFloat(m);
}

// 8-bit state: add vec4 i's largest |value| of each 8-bit state buffer to its block's slot.
#define VK_ADAM_BLOCK_MAX(S, i, half)                                            \
    for (uint k = 0u; k < uint(VK_ADAM_STATE_COUNT); k++) {                      \
        if (i < n_vec4 && vk_adam_state_format(k) >= 2u) {                       \
            atomicMax(vk_adam_block_max[bank][vk_adam_block_slot(k, half) + (lid & 7u)], \
                      vk_adam_abs_max_bits(S[k], i, n));                         \
        }                                                                        \
    }

// The 8-bit path with shared-memory block maxima (any device). A tile is 256 vec4s, one per
// invocation; with VK_ADAM_INT8_VEC4S = 2, 512: invocation lid takes vec4 lid of each half
// (half the barriers per element, twice the loads in flight between them). A block of 256
// values is 64 consecutive vec4s. The trip count is the same for the whole workgroup, so the
// loop can use barriers.
void vk_adam_int8_loop(uint lid, uint n, uint n_vec4) {
    const bool leader = (lid & 63u) == 0u;  // writes its block's absmax
    const bool two = VK_ADAM_INT8_VEC4S > 1u;
    const uint tile = (two ? 2u : 1u) * gl_WorkGroupSize.x;
    const uint stride = gl_NumWorkGroups.x * tile;
    uint bank = 0u;
    for (uint base = gl_WorkGroupID.x * tile; base < n_vec4; base += stride) {
        const uint i0 = base + lid;
        const uint i1 = i0 + gl_WorkGroupSize.x;
        vec4 p0, p1;
        vec4 s0[VK_ADAM_STATE_SLOTS], s1[VK_ADAM_STATE_SLOTS];
        VK_ADAM_LOAD_AND_UPDATE(p0, s0, i0)
        if (two) {
            VK_ADAM_LOAD_AND_UPDATE(p1, s1, i1)
        }
        // The absmax of each block of 256 updated values. The banks alternate between tiles,
        // so resetting the next tile's bank cannot race with reads of this one (every
        // invocation passes this tile's barriers before that).
        if (lid < 64u * uint(VK_ADAM_STATE_SLOTS)) vk_adam_block_max[bank][lid] = 0u;
        barrier();
        VK_ADAM_BLOCK_MAX(s0, i0, 0u)
        if (two) {
            VK_ADAM_BLOCK_MAX(s1, i1, 1u)
        }
        barrier();
        vec4 amax0 = vec4(0.0), amax1 = vec4(0.0);
        for (uint k = 0u; k < uint(VK_ADAM_STATE_COUNT); k++) {
            amax0[k] = vk_adam_block_absmax(bank, vk_adam_block_slot(k, 0u));
            amax1[k] = two ? vk_adam_block_absmax(bank, vk_adam_block_slot(k, 1u)) : 0.0;
        }
        bank ^= 1u;
        VK_ADAM_STORE(p0, s0, i0, amax0)
        if (two) {
            VK_ADAM_STORE(p1, s1, i1, amax1)
        }
    }
}
#else
// The 8-bit path with subgroup block maxima. One subgroup of W = VK_ADAM_SUBGROUP_SIZE lanes
// owns whole blocks (64 vec4s each): per iteration B = VK_ADAM_INT8_VEC4S consecutive blocks,
// and lane l takes vec4s l, l + W, l + 2W, ... of each (R = 64 / W per block), so every load
// instruction of the subgroup reads W consecutive vec4s. A block's absmax is one subgroupMax:
// no shared memory, no barriers; subgroups loop over blocks on their own (grid-stride over
// every subgroup of the dispatch). The host sizes the grid in whole subgroup iterations.
//
// The lane's R * B vec4s (at most 16: W = 8, B = 2) live in arrays indexed only by literals
// (the macros below spell out each slot J): a loop index would leave them dynamically indexed
// until the driver unrolls, and some drivers (lavapipe) move such arrays to scratch memory
// before that.

// The largest |value| of each 8-bit state buffer in vec4 i (component k: state buffer k), as
// ordered uint bits; 0 for other formats and for lanes past n.
uvec4 vk_adam_block_bits(vec4 S[VK_ADAM_STATE_SLOTS], uint i, uint n) {
    uvec4 b = uvec4(0u);
#if VK_ADAM_STATE_COUNT > 0
    if (VK_ADAM_STATE0_FORMAT >= 2u) b.x = vk_adam_abs_max_bits(S[0], i, n);
#endif
#if VK_ADAM_STATE_COUNT > 1
    if (VK_ADAM_STATE1_FORMAT >= 2u) b.y = vk_adam_abs_max_bits(S[1], i, n);
#endif
#if VK_ADAM_STATE_COUNT > 2
    if (VK_ADAM_STATE2_FORMAT >= 2u) b.z = vk_adam_abs_max_bits(S[2], i, n);
#endif
#if VK_ADAM_STATE_COUNT > 3
    if (VK_ADAM_STATE3_FORMAT >= 2u) b.w = vk_adam_abs_max_bits(S[3], i, n);
#endif
    return b;
}

// The block's absmax per 8-bit state buffer: the maximum over the subgroup (one block).
vec4 vk_adam_subgroup_absmax(uvec4 b) {
    vec4 a = vec4(0.0);
#if VK_ADAM_STATE_COUNT > 0
    if (VK_ADAM_STATE0_FORMAT >= 2u) a.x = uintBitsToFloat(subgroupMax(b.x));
#endif
#if VK_ADAM_STATE_COUNT > 1
    if (VK_ADAM_STATE1_FORMAT >= 2u) a.y = uintBitsToFloat(subgroupMax(b.y));
#endif
#if VK_ADAM_STATE_COUNT > 2
    if (VK_ADAM_STATE2_FORMAT >= 2u) a.z = uintBitsToFloat(subgroupMax(b.z));
#endif
#if VK_ADAM_STATE_COUNT > 3
    if (VK_ADAM_STATE3_FORMAT >= 2u) a.w = uintBitsToFloat(subgroupMax(b.w));
#endif
    return a;
}

// Slot J (a literal) of the lane: vec4 J % R of block b0 + J / R.
#define VK_ADAM_SG_INDEX(J) (((b0 + (J) / R) << 6) + ((J) % R) * W + lane)
#define VK_ADAM_SG_LOAD(J)                                                       \
    if ((J) < R * B) {                                                           \
        const uint i = VK_ADAM_SG_INDEX(J);                                      \
        VK_ADAM_LOAD_AND_UPDATE(p[J], s[J], i)                                   \
        if ((J) < R) {                                                           \
            bits0 = max(bits0, vk_adam_block_bits(s[J], i, n));                 \
        } else {                                                                 \
            bits1 = max(bits1, vk_adam_block_bits(s[J], i, n));                 \
        }                                                                        \
    }
#define VK_ADAM_SG_STORE_PARAM(J)                                                \
    if ((J) < R * B) {                                                           \
        const uint i = VK_ADAM_SG_INDEX(J);                                      \
        VK_ADAM_STORE_PARAM(p[J], i)                                             \
    }
#define VK_ADAM_SG_STORE_STATES(J)                                               \
    if ((J) < R * B) {                                                           \
        const uint i = VK_ADAM_SG_INDEX(J);                                      \
        const bool leader = lane == 0u && (J) % R == 0u; /* vec4 0 of a block */ \
        VK_ADAM_STORE_STATES(s[J], i, ((J) < R ? amax0 : amax1))                 \
    }

void vk_adam_int8_subgroup_loop(uint n, uint n_vec4) {
    const uint W = VK_ADAM_SUBGROUP_SIZE;
    const uint R = 64u / VK_ADAM_SUBGROUP_SIZE;
    const uint B = VK_ADAM_INT8_VEC4S > 1u ? 2u : 1u;
    const uint lane = gl_SubgroupInvocationID;
    const uint n_blocks = (n_vec4 + 63u) >> 6;
    const uint stride = gl_NumWorkGroups.x * gl_NumSubgroups * B;
    // The loop bound is the same for every lane of a subgroup: subgroupMax runs in uniform
    // control flow.
    for (uint b0 = (gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID) * B; b0 < n_blocks; b0 += stride) {
        vec4 p[16];
        vec4 s[16][VK_ADAM_STATE_SLOTS];
        uvec4 bits0 = uvec4(0u), bits1 = uvec4(0u);
        // Every load of the iteration first (the rule's math in between needs none of the
        // stores), so all of them are in flight together.
        VK_ADAM_SG_LOAD(0u) VK_ADAM_SG_LOAD(1u) VK_ADAM_SG_LOAD(2u) VK_ADAM_SG_LOAD(3u)
        VK_ADAM_SG_LOAD(4u) VK_ADAM_SG_LOAD(5u) VK_ADAM_SG_LOAD(6u) VK_ADAM_SG_LOAD(7u)
        VK_ADAM_SG_LOAD(8u) VK_ADAM_SG_LOAD(9u) VK_ADAM_SG_LOAD(10u) VK_ADAM_SG_LOAD(11u)
        VK_ADAM_SG_LOAD(12u) VK_ADAM_SG_LOAD(13u) VK_ADAM_SG_LOAD(14u) VK_ADAM_SG_LOAD(15u)
        // The params need no absmax: storing them first leaves only the state live across the
        // reduction and the quantizer (fewer registers, more subgroups resident per SM).
        VK_ADAM_SG_STORE_PARAM(0u) VK_ADAM_SG_STORE_PARAM(1u) VK_ADAM_SG_STORE_PARAM(2u) VK_ADAM_SG_STORE_PARAM(3u)
        VK_ADAM_SG_STORE_PARAM(4u) VK_ADAM_SG_STORE_PARAM(5u) VK_ADAM_SG_STORE_PARAM(6u) VK_ADAM_SG_STORE_PARAM(7u)
        VK_ADAM_SG_STORE_PARAM(8u) VK_ADAM_SG_STORE_PARAM(9u) VK_ADAM_SG_STORE_PARAM(10u) VK_ADAM_SG_STORE_PARAM(11u)
        VK_ADAM_SG_STORE_PARAM(12u) VK_ADAM_SG_STORE_PARAM(13u) VK_ADAM_SG_STORE_PARAM(14u) VK_ADAM_SG_STORE_PARAM(15u)
        const vec4 amax0 = vk_adam_subgroup_absmax(bits0);
        const vec4 amax1 = B > 1u ? vk_adam_subgroup_absmax(bits1) : vec4(0.0);
        VK_ADAM_SG_STORE_STATES(0u) VK_ADAM_SG_STORE_STATES(1u) VK_ADAM_SG_STORE_STATES(2u) VK_ADAM_SG_STORE_STATES(3u)
        VK_ADAM_SG_STORE_STATES(4u) VK_ADAM_SG_STORE_STATES(5u) VK_ADAM_SG_STORE_STATES(6u) VK_ADAM_SG_STORE_STATES(7u)
        VK_ADAM_SG_STORE_STATES(8u) VK_ADAM_SG_STORE_STATES(9u) VK_ADAM_SG_STORE_STATES(10u) VK_ADAM_SG_STORE_STATES(11u)
        VK_ADAM_SG_STORE_STATES(12u) VK_ADAM_SG_STORE_STATES(13u) VK_ADAM_SG_STORE_STATES(14u) VK_ADAM_SG_STORE_STATES(15u)
    }
}
#endif

// No 8-bit state: VK_ADAM_VEC4S vec4s per invocation per tile of 256 * VK_ADAM_VEC4S vec4s,
// invocation lid taking vec4s lid, lid + 256, ... (each load instruction of the workgroup
// reads consecutive vec4s); all loads first, then the stores. Slots indexed by literals only
// (see the subgroup loop above).
#define VK_ADAM_PLAIN_LOAD(J)                                                    \
    if ((J) < V) {                                                               \
        const uint i = base + lid + (J) * gl_WorkGroupSize.x;                    \
        VK_ADAM_LOAD_AND_UPDATE(p[J], s[J], i)                                   \
    }
#define VK_ADAM_PLAIN_STORE(J)                                                   \
    if ((J) < V) {                                                               \
        const uint i = base + lid + (J) * gl_WorkGroupSize.x;                    \
        VK_ADAM_STORE(p[J], s[J], i, no_absmax)                                  \
    }

void vk_adam_plain_loop(uint lid, uint n, uint n_vec4) {
    const bool leader = false;  // no absmax to write
    const vec4 no_absmax = vec4(0.0);
    const uint V = VK_ADAM_VEC4S;
    const uint tile = V * gl_WorkGroupSize.x;
    for (uint base = gl_WorkGroupID.x * tile; base < n_vec4; base += gl_NumWorkGroups.x * tile) {
        vec4 p[4];
        vec4 s[4][VK_ADAM_STATE_SLOTS];
        VK_ADAM_PLAIN_LOAD(0u) VK_ADAM_PLAIN_LOAD(1u) VK_ADAM_PLAIN_LOAD(2u) VK_ADAM_PLAIN_LOAD(3u)
        // The skip flag is read with the tile's loads, not before them: one memory round trip
        // less before the first load (a tiny step is latency-bound). Nothing is stored yet.
        if (vk_adam_skip_step != 0u) {
            return;
        }
        VK_ADAM_PLAIN_STORE(0u) VK_ADAM_PLAIN_STORE(1u) VK_ADAM_PLAIN_STORE(2u) VK_ADAM_PLAIN_STORE(3u)
    }
}

void main() {
    // The version mark is used once, so that an optimizing SPIR-V build keeps it (the driver
    // folds the branch away: the host never specializes it).
    if (VK_ADAM_HARNESS != VK_ADAM_HARNESS_VERSION) {
        return;
    }
    const uint lid = gl_LocalInvocationID.x;
    const uint n = vk_adam_pc.n;
    const uint n_vec4 = (n + 3u) >> 2;
    if (VK_ADAM_CAPTURABLE != 0u) {
        vk_adam_clock_read();
    }
    // Grid-stride loops (the host caps the workgroup count: maxComputeWorkGroupCount[0] is
    // 65535 on many drivers). The plain loop checks the skip flag itself.
    if (!VK_ADAM_ANY_INT8) {
        vk_adam_plain_loop(lid, n, n_vec4);
    } else if (vk_adam_skip_step == 0u) {
        // every invocation reads the same flag: no barrier below is left half-reached
        vk_adam_load_map_values();
#ifdef VK_ADAM_SUBGROUPS
        vk_adam_int8_subgroup_loop(n, n_vec4);
#else
        vk_adam_int8_loop(lid, n, n_vec4);
#endif
    }
    if (VK_ADAM_CAPTURABLE != 0u) {
        vk_adam_clock_tick();
    }
}

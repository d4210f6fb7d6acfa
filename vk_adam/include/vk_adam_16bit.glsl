// 16-bit float values held in 32-bit words (vk-adam's packed param and gradient buffers):
// exact conversions to fp32, shared by the rule harness and the gradient passes.
#ifndef VK_ADAM_16BIT_GLSL
#define VK_ADAM_16BIT_GLSL

// IEEE half (fp16) bits to fp32, exactly, with no branch. The half's exponent and significand
// go to fp32's places with the exponent rebiased by 113, so every finite half becomes a normal
// fp32 value g: 2^-14 + m * 2^-24 for a subnormal half m * 2^-24 (or zero), twice the value of
// a normal half. The half is then min(g / 2, g - 2^-14), each exact where it is the minimum:
// no fp32 subnormal appears (a device may flush them), and the hardware's fp16 conversion (which
// may flush fp16 subnormals) is not used. inf and NaN, exponent 31, are moved to 255 with their
// payload. A branch for the rare values costs more than the arithmetic: fp16
// gradients of N(0, 0.01) hold 0.5% subnormals, so about half of the subgroups converting four
// values per lane would take both paths (results/h100-2026-12-07-f16-exact); the float min
// leaves less work to the integer units, which bind the 8-bit rows
// (results/h100-2026-12-07-grid).
float vk_adam_f16_to_f32(uint h) {
    const uint mag = (h & 0x7FFFu) << 13;
    const float g = uintBitsToFloat(mag + 0x38800000u);
    const uint u = floatBitsToUint(min(0.5 * g, g - 6.103515625e-05)) + (mag >= 0x0F800000u ? 0x38000000u : 0u);
    return uintBitsToFloat(u | ((h & 0x8000u) << 16));
}

// fmt 1: fp16, 2: bf16 (the upper half of an fp32).
float vk_adam_16_to_f32(uint h, uint fmt) {
    return fmt == 1u ? vk_adam_f16_to_f32(h) : uintBitsToFloat(h << 16);
}

// Element i of a buffer of 16-bit values (two per word, the first in the low half).
float vk_adam_16_element(uint word, uint i, uint fmt) {
    return vk_adam_16_to_f32((i & 1u) != 0u ? word >> 16 : word & 0xFFFFu, fmt);
}

#endif

// 16-bit float values held in 32-bit words (vk-adam's packed param and gradient buffers):
// exact conversions to fp32, shared by the rule harness and the gradient passes.
#ifndef VK_ADAM_16BIT_GLSL
#define VK_ADAM_16BIT_GLSL

// IEEE half (fp16) bits to fp32, exactly, with no branch: the half's exponent and significand
// moved to fp32's places and rebiased; zero and subnormals (m * 2^-24, which a device may flush
// when it unpacks fp16) by exact fp32 arithmetic on normal values, (2^-14 + m * 2^-24) - 2^-14;
// inf and NaN with their payload. A branch for the rare values costs more than the arithmetic:
// fp16 gradients of N(0, 0.01) hold 0.5% subnormals, so about half of the subgroups converting
// four values per lane would take both paths (results/h100-2026-12-07-f16-exact).
float vk_adam_f16_to_f32(uint h) {
    const uint mag = (h & 0x7FFFu) << 13;
    // normal: the exponent rebiased by 127 - 15 = 112; inf, NaN (exponent 31): to 255
    uint u = mag + (mag >= 0x0F800000u ? 0x70000000u : 0x38000000u);
    const float small = uintBitsToFloat(mag + 0x38800000u) - 6.103515625e-05;  // exponent 0
    u = mag < 0x00800000u ? floatBitsToUint(small) : u;
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

// 16-bit float values held in 32-bit words (vk-adam's packed param and gradient buffers):
// exact conversions to fp32, shared by the rule harness and the gradient passes.
#ifndef VK_ADAM_16BIT_GLSL
#define VK_ADAM_16BIT_GLSL

// IEEE half (fp16) bits to fp32, exactly (subnormals included).
float vk_adam_f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0u) {  // zero or subnormal: m * 2^-24, exact
        float v = float(m) * 5.9604644775390625e-8;
        return sign != 0u ? -v : v;
    }
    if (e == 31u) {
        return uintBitsToFloat(sign | 0x7F800000u | (m << 13));
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
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

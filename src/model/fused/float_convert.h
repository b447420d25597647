// Widening to fp32 and rounding back, for the fused kernels' loops over 16-bit tensors. bf16 is
// read and written as its bits (uint16_t), not as c10::BFloat16: GCC does not vectorise a loop that
// loads that class, nor one that rounds through its NaN test. Rounding is to nearest even, a NaN
// stays a quiet NaN, as c10's. Bits are reinterpreted by __builtin_bit_cast, not memcpy: in an
// `omp simd` loop a local whose address is taken becomes a per-lane array. fp16 goes through c10's.
#pragma once
#include <c10/util/Half.h>

#include <cstdint>

namespace dtrain::fused {

using Bf16Bits = uint16_t;

inline __attribute__((always_inline)) float widen(float x) { return x; }
inline __attribute__((always_inline)) float widen(c10::Half x) { return static_cast<float>(x); }
inline __attribute__((always_inline)) float widen(Bf16Bits x) { return __builtin_bit_cast(float, static_cast<uint32_t>(x) << 16); }

template <typename T>
inline __attribute__((always_inline)) T narrow(float x);
template <>
inline __attribute__((always_inline)) float narrow<float>(float x) {
  return x;
}
template <>
inline __attribute__((always_inline)) c10::Half narrow<c10::Half>(float x) {
  return c10::Half(x);
}
template <>
inline __attribute__((always_inline)) Bf16Bits narrow<Bf16Bits>(float x) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, x);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return x != x ? Bf16Bits(0x7fc0) : static_cast<Bf16Bits>(rounded);
}

}  // namespace dtrain::fused

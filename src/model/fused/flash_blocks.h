// Building blocks of the CPU flash-attention kernel (flash_attention.h): the block GEMM and the
// layouts it reads. The GEMM is ATen's exported oneDNN micro-kernel (cpublas::brgemm), 16-bit
// operands with fp32 accumulation, which on AVX512-BF16 runs vdpbf16ps on a B matrix in VNNI layout:
// consecutive pairs of B's rows interleaved, so that element (k, n) sits at ((k/2)·N + n)·2 + k%2.
// Measured on 64×64×64 bf16 blocks it ran ~3× faster than MKL's cblas_gemm_bf16bf16f32 and fp32
// SGEMM on this kernel's shapes (docs/benchmarks.md, "Attention kernel").
#pragma once
#include <ATen/ATen.h>
#include <ATen/native/CPUBlas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "model/fused/flash_softmax.h"
#include "model/fused/float_convert.h"

namespace dtrain::flash {

// Query rows and key columns per block: a 64×64 fp32 score block and its 16-bit copies stay in L1/L2.
// Equal sizes keep every causal row seeing a key in each block it visits (block j <= block i).
constexpr int64_t kBlock = 64;

inline int64_t round_up_even(int64_t n) { return n + (n & 1); }

// A [B, heads, T, hd] tensor's data and strides, read once: inside the loops a store through T* could
// alias the tensor's own fields, which the compiler would then reload at every element.
template <typename T>
struct HeadsView {
  T* data;
  int64_t batch, head, row;
  explicit HeadsView(const at::Tensor& t) : data(t.data_ptr<T>()), batch(t.stride(0)), head(t.stride(1)), row(t.stride(2)) {}
  T* rows(int64_t b, int64_t h, int64_t r) const { return data + b * batch + h * head + r * row; }
};

template <typename T>
T to_16bit(float x) {
  if constexpr (std::is_same_v<T, at::BFloat16>) return at::BFloat16(fused::narrow<fused::Bf16Bits>(x), at::BFloat16::from_bits());
  else return T(x);
}

// out[0..n) = x rounded to T.
template <typename T>
void round_row(const float* x, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, at::BFloat16>) round_to_bfloat16(x, n, reinterpret_cast<uint16_t*>(out));
  else for (int64_t i = 0; i < n; ++i) out[i] = T(x[i]);
}

// C[M×N] (+)= A[M×K]·B, A row-major (K contiguous; K even, a zero column padding an odd K), B packed
// by pack_rows / pack_columns with N columns.
template <typename T>
void block_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* packed_b, float* C, int64_t ldc, bool add) {
  at::native::cpublas::brgemm(M, N, K, lda, N, ldc, add, A, packed_b, C, /*is_vnni=*/true);
}

// The dot product of two 16-bit rows in fp32.
template <typename T>
float dot(const T* a, const T* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<float>(a[i]) * static_cast<float>(b[i]);
  return sum;
}

// B = src (rows × cols, row stride ld) in VNNI layout, rows padded to even with zeros. Each output
// word is built whole from the two rows' 16-bit values, a loop that vectorises.
template <typename T>
void pack_rows(const T* src, int64_t rows, int64_t cols, int64_t ld, T* dst) {
  static_assert(sizeof(T) == 2, "16-bit operands");
  for (int64_t k = 0; k < rows; k += 2) {
    const uint16_t* r0 = reinterpret_cast<const uint16_t*>(src + k * ld);
    const uint16_t* r1 = k + 1 < rows ? r0 + ld : nullptr;
    uint32_t* out = reinterpret_cast<uint32_t*>(dst + k * cols);
    if (r1)
      for (int64_t n = 0; n < cols; ++n) out[n] = uint32_t(r0[n]) | uint32_t(r1[n]) << 16;
    else
      for (int64_t n = 0; n < cols; ++n) out[n] = r0[n];
  }
}

// B = srcᵀ (src rows × cols, row stride ld; cols even) in VNNI layout: B has cols rows and `rows`
// columns, and a pair (src[n][k], src[n][k+1]) is one 32-bit word, copied whole; written in order.
template <typename T>
void pack_columns(const T* src, int64_t rows, int64_t cols, int64_t ld, T* dst) {
  static_assert(sizeof(T) == 2, "16-bit operands");
  uint32_t* out = reinterpret_cast<uint32_t*>(dst);
  for (int64_t k = 0; k < cols; k += 2)
    for (int64_t n = 0; n < rows; ++n) std::memcpy(out++, src + n * ld + k, sizeof(uint32_t));
}

// dst (rows × cols, stride ld_dst) = src rounded to T, a zero column after an odd cols.
template <typename T>
void round_rows(const float* src, int64_t rows, int64_t cols, int64_t ld_src, T* dst, int64_t ld_dst) {
  for (int64_t r = 0; r < rows; ++r) {
    round_row(src + r * ld_src, cols, dst + r * ld_dst);
    if (cols & 1) dst[r * ld_dst + cols] = T(0);
  }
}

// dst (cols × rows, stride ld_dst) = srcᵀ rounded to T, a zero column after an odd rows.
template <typename T>
void round_transposed(const float* src, int64_t rows, int64_t cols, int64_t ld_src, T* dst, int64_t ld_dst) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[c * ld_dst + r] = to_16bit<T>(src[r * ld_src + c]);
    if (rows & 1) dst[c * ld_dst + rows] = T(0);
  }
}

// Keys of block j that query row `row` may see: all of them, or under the top-left causal mask those
// at index <= row.
inline int64_t visible_keys(bool causal, int64_t row, int64_t key_begin, int64_t keys) {
  return causal ? std::clamp<int64_t>(row - key_begin + 1, 0, keys) : keys;
}

// Key blocks a query block [row_begin, row_begin + rows) visits: under the causal mask none past its last row.
inline int64_t key_blocks_for(bool causal, int64_t row_begin, int64_t rows, int64_t tk) {
  const int64_t all = (tk + kBlock - 1) / kBlock;
  return causal ? std::min(all, (row_begin + rows - 1) / kBlock + 1) : all;
}

}  // namespace dtrain::flash

#include "model/fused/token_sum.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>

namespace dtrain {

namespace {

// Columns per task: 64 16-bit columns are two cache lines of each row.
constexpr int64_t kSumColumns = 64;
// Enough elements per task that a thread's share outweighs the cost of handing it out.
constexpr int64_t kSumGrain = 1 << 15;

// out[c] = Σ_r src[r·ld + c] for c < width ≤ kSumColumns, r in order.
template <typename T>
inline __attribute__((always_inline)) void sum_block(const T* __restrict src, int64_t rows, int64_t ld, int64_t width,
                                                     float* __restrict out) {
  float acc[kSumColumns] = {};
  if (width == kSumColumns) {  // a trip count the compiler knows: the sums stay in vector registers
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = src + r * ld;
      for (int64_t c = 0; c < kSumColumns; ++c) acc[c] += static_cast<float>(row[c]);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = src + r * ld;
      for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<float>(row[c]);
    }
  }
  std::copy(acc, acc + width, out);
}

// x86-64-v4 (AVX-512 F, BW, DQ, VL) rather than AVX-512F alone: 16-bit loads of 512-bit vectors need BW.
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void sum_block_bf16(const c10::BFloat16* src, int64_t rows, int64_t ld,
                                                                                 int64_t width, float* out) {
  sum_block(src, rows, ld, width, out);
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void sum_block_fp16(const c10::Half* src, int64_t rows, int64_t ld,
                                                                                 int64_t width, float* out) {
  sum_block(src, rows, ld, width, out);
}

__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void sum_block_fp32(const float* src, int64_t rows, int64_t ld, int64_t width,
                                                                                 float* out) {
  sum_block(src, rows, ld, width, out);
}

template <typename T, typename Block>
at::Tensor sum_columns(const at::Tensor& g2, Block block) {
  const at::Tensor src = g2.contiguous();
  const int64_t rows = src.size(0), cols = src.size(1);
  at::Tensor out = at::empty({cols}, src.options().dtype(at::kFloat));
  const T* in = src.data_ptr<T>();
  float* sums = out.data_ptr<float>();
  const int64_t blocks = (cols + kSumColumns - 1) / kSumColumns;
  const int64_t grain = std::max<int64_t>(1, kSumGrain / std::max<int64_t>(1, rows * kSumColumns));
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t c = b * kSumColumns;
      block(in + c, rows, cols, std::min(kSumColumns, cols - c), sums + c);
    }
  });
  return out;
}

}  // namespace

at::Tensor sum_over_tokens_fp32(const at::Tensor& g) {
  RECORD_FUNCTION("dtrain::sum_over_tokens", std::vector<c10::IValue>({g}));
  const at::Tensor g2 = g.reshape({-1, g.size(-1)});
  if (g2.is_cpu() && g2.scalar_type() == at::kBFloat16) return sum_columns<c10::BFloat16>(g2, sum_block_bf16);
  if (g2.is_cpu() && g2.scalar_type() == at::kHalf) return sum_columns<c10::Half>(g2, sum_block_fp16);
  if (g2.is_cpu() && g2.scalar_type() == at::kFloat) return sum_columns<float>(g2, sum_block_fp32);
  return at::sum(g2, {0}, false, at::kFloat);
}

}  // namespace dtrain

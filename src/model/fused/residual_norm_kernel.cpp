#include "model/fused/residual_norm_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/fused/float_convert.h"

namespace dtrain::fused {

namespace {

// The bodies are inlined into one function per product type and ISA (the clones below), so that each
// loop is vectorised for the machine it runs on; the reductions are `omp simd` ones because fp32 sums
// are not reassociated otherwise. A row (a model's width, a few hundred floats) stays in L1 between
// its passes.
template <typename T>
inline __attribute__((always_inline)) void forward_rows(const ResidualNormRows& a, int64_t begin, int64_t end) {
  const int64_t d = a.features;
  const float* __restrict w = a.weight;
  for (int64_t r = begin; r < end; ++r) {
    const float* __restrict x = a.x + r * d;
    const float* __restrict h = x;
    if (a.product) {
      const T* __restrict y = static_cast<const T*>(a.product) + r * d;
      float* __restrict out = a.h + r * d;
      if (a.bias) {
        const float* __restrict b = a.bias;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) out[i] = x[i] + (widen(y[i]) + b[i]);
      } else {
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) out[i] = x[i] + widen(y[i]);
      }
      h = out;
    }
    if (!w) continue;
    float mean = 0;
    if (!a.rms) {
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < d; ++i) sum += h[i];
      mean = sum / d;
      a.mean[r] = mean;
    }
    float squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t i = 0; i < d; ++i) squares += (h[i] - mean) * (h[i] - mean);
    const float rstd = 1.0f / std::sqrt(squares / d + a.eps);
    a.rstd[r] = rstd;
    float* __restrict n = a.n + r * d;
    if (a.norm_bias) {
      const float* __restrict nb = a.norm_bias;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) n[i] = (h[i] - mean) * rstd * w[i] + nb[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) n[i] = (h[i] - mean) * rstd * w[i];
    }
  }
}

// Rows [begin, end); the sums over them go to acc: [3, features] for d_bias, d_weight, d_norm_bias.
template <typename T>
inline __attribute__((always_inline)) void backward_rows(const ResidualNormRows& a, const ResidualNormGrads& g, int64_t begin,
                                                         int64_t end, float* acc) {
  const int64_t d = a.features;
  const float* __restrict w = a.weight;
  float* __restrict acc_bias = acc;
  float* __restrict acc_weight = acc + d;
  float* __restrict acc_norm_bias = acc + 2 * d;
  for (int64_t r = begin; r < end; ++r) {
    float* __restrict dx = g.d_x + r * d;
    if (w && g.d_n) {
      const float* __restrict h = (a.h ? a.h : a.x) + r * d;
      const float* __restrict dn = g.d_n + r * d;
      const float mean = a.rms ? 0.0f : a.mean[r], rstd = a.rstd[r];
      float sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int64_t i = 0; i < d; ++i) {
        const float gi = dn[i] * w[i];
        sum_g += gi;
        sum_gx += gi * ((h[i] - mean) * rstd);
      }
      // dh = rstd·(g − mean(g) − x̂·mean(g·x̂)) for LayerNorm, without the mean(g) term for RMSNorm.
      const float mean_g = a.rms ? 0.0f : sum_g / d, mean_gx = sum_gx / d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) {
        const float xhat = (h[i] - mean) * rstd;
        dx[i] = rstd * (dn[i] * w[i] - mean_g - xhat * mean_gx);
        acc_weight[i] += dn[i] * xhat;
        acc_norm_bias[i] += dn[i];
      }
      if (g.d_h) {
        const float* __restrict dh = g.d_h + r * d;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) dx[i] += dh[i];
      }
    } else if (g.d_h) {
      std::copy(g.d_h + r * d, g.d_h + (r + 1) * d, dx);
    } else {
      std::fill(dx, dx + d, 0.0f);
    }
    if (g.d_product) {
      T* __restrict dy = static_cast<T*>(g.d_product) + r * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dy[i] = narrow<T>(dx[i]);
    }
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) acc_bias[i] += dx[i];
  }
}

#define DTRAIN_RESIDUAL_NORM_CLONES(T, name)                                                                                       \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void forward_##name(const ResidualNormRows& a, int64_t begin,       \
                                                                                   int64_t end) {                                  \
    forward_rows<T>(a, begin, end);                                                                                                \
  }                                                                                                                                \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void backward_##name(                                               \
      const ResidualNormRows& a, const ResidualNormGrads& g, int64_t begin, int64_t end, float* acc) {                             \
    backward_rows<T>(a, g, begin, end, acc);                                                                                       \
  }
DTRAIN_RESIDUAL_NORM_CLONES(float, fp32)
DTRAIN_RESIDUAL_NORM_CLONES(Bf16Bits, bf16)
DTRAIN_RESIDUAL_NORM_CLONES(c10::Half, fp16)
#undef DTRAIN_RESIDUAL_NORM_CLONES

// Enough elements per task that a thread's share outweighs the cost of handing it out.
constexpr int64_t kGrain = 1 << 14;

}  // namespace

void residual_norm_forward(const ResidualNormRows& a) {
  auto run = a.product_type == c10::kBFloat16 ? forward_bf16 : a.product_type == c10::kHalf ? forward_fp16 : forward_fp32;
  at::parallel_for(0, a.rows, std::max<int64_t>(1, kGrain / a.features), [&](int64_t begin, int64_t end) { run(a, begin, end); });
}

void residual_norm_backward(const ResidualNormRows& a, const ResidualNormGrads& g) {
  auto run = a.product_type == c10::kBFloat16 ? backward_bf16 : a.product_type == c10::kHalf ? backward_fp16 : backward_fp32;
  const int64_t d = a.features;
  // One block of rows per thread, each summing into its own accumulators: the same split, and so the
  // same sums, for a given thread count.
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(a.rows, at::get_num_threads()));
  std::vector<float> partial(blocks * 3 * d, 0.0f);
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) run(a, g, a.rows * k / blocks, a.rows * (k + 1) / blocks, partial.data() + k * 3 * d);
  });
  float* outs[3] = {g.d_bias, g.d_weight, g.d_norm_bias};
  for (int j = 0; j < 3; ++j) {
    if (!outs[j]) continue;
    std::fill(outs[j], outs[j] + d, 0.0f);
    for (int64_t k = 0; k < blocks; ++k)
      for (int64_t i = 0; i < d; ++i) outs[j][i] += partial[(k * 3 + j) * d + i];
  }
}

}  // namespace dtrain::fused

#include "model/fused/softmax_cross_entropy_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "model/fused/float_convert.h"

namespace dtrain::fused {

namespace {

// Branch-free, so that a loop calling it vectorises (glibc's vector expf is declared only under
// -ffast-math); no std::max either, whose reference arguments make `omp simd` keep per-lane copies
// of the locals in memory. Rounding to the nearest k by adding and subtracting 1.5·2^23 needs no rounding
// instruction of the target ISA.
inline __attribute__((always_inline)) float exp_inline(float x) {
  constexpr float kLow = -87.3f, kLog2e = 1.44269504088896341f, kRound = 12582912.0f;
  const float clamped = x > kLow ? x : kLow;
  const float k = (clamped * kLog2e + kRound) - kRound;
  // ln 2 in two parts, the first exact in few bits, so that clamped − k·ln2 loses nothing.
  const float r = (clamped - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * r * r + r + 1.0f;
  const float two_k = __builtin_bit_cast(float, (static_cast<int32_t>(k) + 127) << 23);
  return e_r * two_k;
}

// 16-bit rows go through the exponentials a block at a time, widened into an fp32 buffer that stays
// in L1: GCC vectorises the exponential's loop over fp32 but not over 16-bit loads.
constexpr int64_t kBlock = 1024;

// Σ e^(x[i] − shift) over n fp32 values.
inline __attribute__((always_inline)) float sum_exp(const float* __restrict x, int64_t n, float shift) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += exp_inline(x[i] - shift);
  return sum;
}

// out[i] = e^(x[i] − shift)·scale over n fp32 values.
inline __attribute__((always_inline)) void scaled_exp(const float* __restrict x, int64_t n, float shift, float scale, float* __restrict out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = exp_inline(x[i] - shift) * scale;
}

template <typename T>
inline __attribute__((always_inline)) const float* widened(const T* __restrict x, int64_t n, float* __restrict buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) buffer[i] = widen(x[i]);
    return buffer;
  }
}

template <typename T>
inline __attribute__((always_inline)) double forward_rows(const CrossEntropyRows& a, int64_t begin, int64_t end) {
  const int64_t V = a.vocab;
  alignas(64) float buffer[kBlock];
  double total = 0;
  for (int64_t row = begin; row < end; ++row) {
    const T* __restrict x = static_cast<const T*>(a.logits) + row * V;
    float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
    for (int64_t i = 0; i < V; ++i) {
      const float v = widen(x[i]);
      max = v > max ? v : max;
    }
    float sum = 0;
    for (int64_t b = 0; b < V; b += kBlock) {
      const int64_t n = std::min(kBlock, V - b);
      sum += sum_exp(widened(x + b, n, buffer), n, max);
    }
    const float lse = max + std::log(sum);
    a.lse[row] = lse;
    const int64_t t = a.targets[row];
    if (t != a.ignore_index) total += lse - widen(x[t]);
  }
  return total;
}

template <typename T>
inline __attribute__((always_inline)) void backward_rows(const CrossEntropyRows& a, float scale, void* grad, int64_t begin, int64_t end) {
  const int64_t V = a.vocab;
  alignas(64) float in[kBlock], out[kBlock];
  for (int64_t row = begin; row < end; ++row) {
    const T* __restrict x = static_cast<const T*>(a.logits) + row * V;
    T* __restrict g = static_cast<T*>(grad) + row * V;
    const int64_t t = a.targets[row];
    if (t == a.ignore_index) {
      std::fill(g, g + V, narrow<T>(0.0f));
      continue;
    }
    const float lse = a.lse[row];
    for (int64_t b = 0; b < V; b += kBlock) {
      const int64_t n = std::min(kBlock, V - b);
      if constexpr (std::is_same_v<T, float>) {
        scaled_exp(x + b, n, lse, scale, g + b);
      } else {
        scaled_exp(widened(x + b, n, in), n, lse, scale, out);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) g[b + i] = narrow<T>(out[i]);
      }
    }
    g[t] = narrow<T>((exp_inline(widen(x[t]) - lse) - 1.0f) * scale);
  }
}

#define DTRAIN_CROSS_ENTROPY_CLONES(T, name)                                                                                          \
  __attribute__((target_clones("avx512f", "avx2", "default"))) double forward_##name(const CrossEntropyRows& a, int64_t begin,         \
                                                                                     int64_t end) {                                    \
    return forward_rows<T>(a, begin, end);                                                                                            \
  }                                                                                                                                   \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void backward_##name(const CrossEntropyRows& a, float scale, void* grad, \
                                                                                    int64_t begin, int64_t end) {                      \
    backward_rows<T>(a, scale, grad, begin, end);                                                                                     \
  }
DTRAIN_CROSS_ENTROPY_CLONES(float, fp32)
DTRAIN_CROSS_ENTROPY_CLONES(Bf16Bits, bf16)
DTRAIN_CROSS_ENTROPY_CLONES(c10::Half, fp16)
#undef DTRAIN_CROSS_ENTROPY_CLONES

// Enough elements per task that a thread's share outweighs the cost of handing it out.
constexpr int64_t kGrain = 1 << 16;

int64_t grain_rows(const CrossEntropyRows& a) { return std::max<int64_t>(1, kGrain / a.vocab); }

}  // namespace

float exp_approx(float x) { return exp_inline(x); }

double cross_entropy_forward(const CrossEntropyRows& a) {
  auto run = a.type == c10::kBFloat16 ? forward_bf16 : a.type == c10::kHalf ? forward_fp16 : forward_fp32;
  // Each task's sum in its own slot, added in a fixed order: the loss does not depend on scheduling.
  const int64_t grain = grain_rows(a), tasks = (a.rows + grain - 1) / grain;
  std::vector<double> sums(tasks, 0.0);
  at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) sums[k] = run(a, k * grain, std::min(a.rows, (k + 1) * grain));
  });
  double total = 0;
  for (double s : sums) total += s;
  return total;
}

void cross_entropy_backward(const CrossEntropyRows& a, float scale, void* grad) {
  auto run = a.type == c10::kBFloat16 ? backward_bf16 : a.type == c10::kHalf ? backward_fp16 : backward_fp32;
  at::parallel_for(0, a.rows, grain_rows(a), [&](int64_t begin, int64_t end) { run(a, scale, grad, begin, end); });
}

}  // namespace dtrain::fused

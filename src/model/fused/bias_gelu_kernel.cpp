#include "model/fused/bias_gelu_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "model/fused/float_convert.h"

namespace dtrain {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
// Rows of one backward task; its partial bias gradient is one row of a [blocks, n] fp32 buffer.
constexpr int64_t kRowBlock = 64;
// Enough elements per task that a thread's share outweighs the cost of handing it out.
constexpr int64_t kGeluGrain = 1 << 15;

inline __attribute__((always_inline)) float tanh_body(float x) {
  // Eigen's coefficients: odd numerator, even denominator.
  constexpr float a1 = 4.89352455891786e-03f, a3 = 6.37261928875436e-04f, a5 = 1.48572235717979e-05f,
                  a7 = 5.12229709037114e-08f, a9 = -8.60467152213735e-11f, a11 = 2.00018790482477e-13f,
                  a13 = -2.76076847742355e-16f;
  constexpr float b0 = 4.89352518554385e-03f, b2 = 2.26843463243900e-03f, b4 = 1.18534705686654e-04f,
                  b6 = 1.19825839466702e-06f;
  constexpr float clamp = 7.90531110763549805f;
  x = std::min(std::max(x, -clamp), clamp);  // in this order a NaN stays NaN
  const float x2 = x * x;
  const float p = x * (a1 + x2 * (a3 + x2 * (a5 + x2 * (a7 + x2 * (a9 + x2 * (a11 + x2 * a13))))));
  const float q = b0 + x2 * (b2 + x2 * (b4 + x2 * b6));
  return p / q;
}

// fp32 → T rounded to nearest even as c10::BFloat16 rounds (float_convert.h), without the branch on
// NaN that keeps c10's conversion out of vector loops.
template <typename T>
inline __attribute__((always_inline)) T narrow(float f) {
  if constexpr (std::is_same_v<T, float>) {
    return f;
  } else {
    return c10::BFloat16(fused::narrow<fused::Bf16Bits>(f), c10::BFloat16::from_bits());
  }
}

template <typename T>
inline __attribute__((always_inline)) void forward_row(const T* __restrict y, const float* __restrict b, T* __restrict out, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const float x = static_cast<float>(y[c]) + b[c];
    const float t = tanh_body(kSqrt2OverPi * x * (1.f + kCubic * x * x));
    out[c] = narrow<T>(0.5f * x * (1.f + t));
  }
}

// dx = g · GELU'(x), GELU'(x) = (1 + t)/2 + x/2 · (1 - t²) · √(2/π) · (1 + 3·0.044715 x²); acc += dx.
template <typename T>
inline __attribute__((always_inline)) void backward_row(const T* __restrict g, const T* __restrict y, const float* __restrict b,
                                                        T* __restrict dx, float* __restrict acc, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const float x = static_cast<float>(y[c]) + b[c];
    const float x2 = x * x;
    const float t = tanh_body(kSqrt2OverPi * x * (1.f + kCubic * x2));
    const float slope = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kCubic * x2);
    const float d = static_cast<float>(g[c]) * slope;
    dx[c] = narrow<T>(d);
    acc[c] += d;
  }
}

// x86-64-v4 (AVX-512 F, BW, DQ, VL) rather than AVX-512F alone: 16-bit loads and stores of 512-bit
// vectors need BW.
#define DTRAIN_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
DTRAIN_CLONES void forward_bf16(const c10::BFloat16* y, const float* b, c10::BFloat16* out, int64_t n) { forward_row(y, b, out, n); }
DTRAIN_CLONES void forward_fp32(const float* y, const float* b, float* out, int64_t n) { forward_row(y, b, out, n); }
DTRAIN_CLONES void backward_bf16(const c10::BFloat16* g, const c10::BFloat16* y, const float* b, c10::BFloat16* dx, float* acc, int64_t n) {
  backward_row(g, y, b, dx, acc, n);
}
DTRAIN_CLONES void backward_fp32(const float* g, const float* y, const float* b, float* dx, float* acc, int64_t n) {
  backward_row(g, y, b, dx, acc, n);
}
DTRAIN_CLONES float tanh_clone(float x) { return tanh_body(x); }
#undef DTRAIN_CLONES

void forward_rows(const c10::BFloat16* y, const float* b, c10::BFloat16* out, int64_t n) { forward_bf16(y, b, out, n); }
void forward_rows(const float* y, const float* b, float* out, int64_t n) { forward_fp32(y, b, out, n); }
void backward_rows(const c10::BFloat16* g, const c10::BFloat16* y, const float* b, c10::BFloat16* dx, float* acc, int64_t n) {
  backward_bf16(g, y, b, dx, acc, n);
}
void backward_rows(const float* g, const float* y, const float* b, float* dx, float* acc, int64_t n) { backward_fp32(g, y, b, dx, acc, n); }

void check_operands(const at::Tensor& y, const at::Tensor& bias) {
  TORCH_CHECK(bias_gelu_kernel_applies(y) && y.dim() == 2 && y.is_contiguous(), "bias_gelu: expected a contiguous [rows, n] fp32 or bf16 CPU tensor");
  TORCH_CHECK(bias.scalar_type() == at::kFloat && bias.is_contiguous() && bias.numel() == y.size(1), "bias_gelu: expected a contiguous fp32 bias of ",
              y.size(1), " values, got ", bias.sizes());
}

template <typename T>
void forward_typed(const at::Tensor& y, const at::Tensor& bias, at::Tensor& out) {
  const int64_t rows = y.size(0), n = y.size(1);
  const T* in = y.data_ptr<T>();
  const float* b = bias.data_ptr<float>();
  T* o = out.data_ptr<T>();
  at::parallel_for(0, rows, std::max<int64_t>(1, kGeluGrain / std::max<int64_t>(1, n)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) forward_rows(in + r * n, b, o + r * n, n);
  });
}

template <typename T>
void backward_typed(const at::Tensor& g, const at::Tensor& y, const at::Tensor& bias, at::Tensor& dx, at::Tensor& partial) {
  const int64_t rows = y.size(0), n = y.size(1), blocks = partial.size(0);
  const T *gp = g.data_ptr<T>(), *in = y.data_ptr<T>();
  const float* b = bias.data_ptr<float>();
  T* d = dx.data_ptr<T>();
  float* acc = partial.data_ptr<float>();
  at::parallel_for(0, blocks, std::max<int64_t>(1, kGeluGrain / std::max<int64_t>(1, kRowBlock * n)), [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      for (int64_t r = blk * kRowBlock; r < std::min(rows, (blk + 1) * kRowBlock); ++r) {
        backward_rows(gp + r * n, in + r * n, b, d + r * n, acc + blk * n, n);
      }
    }
  });
}

// Σ over the rows of the [blocks, n] partial sums, in order, on the calling thread: blocks × n
// additions (49k at the bench model's shapes), not worth waking the other threads for (on a loaded
// machine a parallel region costs up to a scheduler time slice).
at::Tensor sum_blocks(const at::Tensor& partial) {
  if (partial.size(0) == 0) return at::zeros({partial.size(1)}, partial.options());
  at::Tensor out = partial[0].clone();
  float* o = out.data_ptr<float>();
  const float* p = partial.data_ptr<float>();
  const int64_t n = partial.size(1);
  for (int64_t blk = 1; blk < partial.size(0); ++blk)
    for (int64_t c = 0; c < n; ++c) o[c] += p[blk * n + c];
  return out;
}

}  // namespace

float tanh_rational(float x) { return tanh_clone(x); }

bool bias_gelu_kernel_applies(const at::Tensor& y) {
  return y.is_cpu() && (y.scalar_type() == at::kFloat || y.scalar_type() == at::kBFloat16);
}

at::Tensor bias_gelu_forward_cpu(const at::Tensor& y, const at::Tensor& bias) {
  check_operands(y, bias);
  at::Tensor out = at::empty_like(y);
  if (y.scalar_type() == at::kBFloat16) {
    forward_typed<c10::BFloat16>(y, bias, out);
  } else {
    forward_typed<float>(y, bias, out);
  }
  return out;
}

BiasGeluGrads bias_gelu_backward_cpu(const at::Tensor& g, const at::Tensor& y, const at::Tensor& bias, bool bias_grad) {
  check_operands(y, bias);
  TORCH_CHECK(g.sizes() == y.sizes() && g.scalar_type() == y.scalar_type() && g.is_contiguous(), "bias_gelu: the gradient ", g.sizes(), " ",
              g.scalar_type(), " does not match the saved ", y.sizes(), " ", y.scalar_type());
  BiasGeluGrads grads{at::empty_like(y), at::Tensor()};
  at::Tensor partial = at::zeros({(y.size(0) + kRowBlock - 1) / kRowBlock, y.size(1)}, y.options().dtype(at::kFloat));
  if (y.scalar_type() == at::kBFloat16) {
    backward_typed<c10::BFloat16>(g, y, bias, grads.input, partial);
  } else {
    backward_typed<float>(g, y, bias, grads.input, partial);
  }
  if (bias_grad) grads.bias = sum_blocks(partial);
  return grads;
}

}  // namespace dtrain

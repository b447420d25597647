// The fused bias + GELU (tanh) against its unfused reference, GELU_tanh(y + b) by ATen's ops with
// autograd in fp64: values, the input gradient and the bias gradient, in fp32 and bf16, and the
// rational tanh it computes with.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <cmath>
#include <limits>

#include "model/fused/bias_gelu.h"
#include "model/fused/bias_gelu_kernel.h"
#include "support/seeded_randn.h"

using namespace dtrain;

namespace {

using test::seeded_randn;

MixedPrecision precision(at::ScalarType dtype) { return MixedPrecision::make(dtype, at::Device(at::kCPU)); }

// The number of elements where |actual - expected| > bound (all fp64).
int64_t outside(const at::Tensor& actual, const at::Tensor& expected, const at::Tensor& bound) {
  return ((actual.to(at::kDouble) - expected).abs() > bound).sum().item<int64_t>();
}

struct BiasGeluReference {
  at::Tensor out, dy, db, x;  // x = y + b
};

// GELU_tanh(y + b) by ATen's unfused ops with autograd, in fp64, from the same y, b and g.
BiasGeluReference bias_gelu_reference(const at::Tensor& y, const at::Tensor& b, const at::Tensor& g) {
  const at::Tensor y64 = y.to(at::kDouble).requires_grad_(), b64 = b.to(at::kDouble).requires_grad_();
  const at::Tensor out = at::gelu(y64 + b64, "tanh");
  out.backward(g.to(at::kDouble));
  return {out.detach(), y64.grad(), b64.grad(), (y64 + b64).detach()};
}

}  // namespace

// A rational function of degree 13/6: within 3.5e-7 of tanh, relative to it, on a dense grid of
// floats around the range where it is not ±1, and a NaN stays NaN.
TEST(BiasGeluTest, RationalTanhIsWithinItsStatedError) {
  double worst = 0;
  for (float x = -12.f; x <= 12.f; x += 1.0f / 4096) {
    const double exact = std::tanh(double(x));
    worst = std::max(worst, std::abs(double(tanh_rational(x)) - exact) / std::max(std::abs(exact), 1e-30));
  }
  EXPECT_LE(worst, 3.5e-7);
  for (const float tiny : {1e-20f, -3e-30f}) EXPECT_LE(std::abs(double(tanh_rational(tiny)) - tiny), 3.5e-7 * std::abs(tiny));
  EXPECT_TRUE(std::isnan(tanh_rational(std::numeric_limits<float>::quiet_NaN())));
}

class BiasGeluPrecisionTest : public ::testing::TestWithParam<at::ScalarType> {};

// Tolerances from the arithmetic, per element, with x = y + b (exact in fp64; its fp32 rounding is
// u = 2⁻²⁴ of |x|, times a slope below 1.2) and the rational tanh's error δ = 3.5e-7 in t:
// - out = x/2·(1 + t): u·1.2|x| + δ|x|/2 + a few fp32 roundings of |out|, then in bf16 half an
//   ulp of |out| (2⁻⁸ of it);
// - dy = g·GELU'(x): t's error moves GELU' by at most δ/2 + δ·|x|·√(2/π)·(1 + 0.134|x|²) (the
//   second term through 1 - t²), x's rounding by u·|x|·|GELU''| ≤ u·|x|·2; then g times that, a
//   few roundings, and in bf16 half an ulp of |dy|;
// - db = Σ dy before dy's rounding to bf16: the sum of the fp32 bounds of dy plus a sequential fp32
//   sum's n·u·Σ|dy|.
TEST_P(BiasGeluPrecisionTest, ValuesAndGradientsFollowTheUnfusedReference) {
  const at::ScalarType dtype = GetParam();
  const bool bf16 = dtype == at::kBFloat16;
  // 150 tokens (two full 64-row blocks and a part) by 70 features (vector bodies and remainders).
  const at::Tensor y = (seeded_randn({3, 50, 70}, 1) * 2).to(dtype), g = seeded_randn({3, 50, 70}, 2).to(dtype);
  const at::Tensor b = (seeded_randn({70}, 3) * 0.5).requires_grad_();
  const at::Tensor yv = y.clone().requires_grad_();
  const at::Tensor out = bias_gelu_tanh(yv, b, precision(dtype));
  EXPECT_EQ(out.scalar_type(), dtype);
  out.backward(g);
  ASSERT_TRUE(yv.grad().defined() && b.grad().defined());
  EXPECT_EQ(yv.grad().scalar_type(), dtype);
  EXPECT_EQ(b.grad().scalar_type(), at::kFloat);

  const BiasGeluReference ref = bias_gelu_reference(y, b.detach(), g);
  const double u = std::ldexp(1.0, -24), delta = 3.5e-7, half_ulp = bf16 ? std::ldexp(1.0, -8) : 0.0;
  const at::Tensor ax = ref.x.abs(), ag = g.to(at::kDouble).abs();
  const at::Tensor out_bound = ax * (1.2 * u + delta / 2) + ref.out.abs() * (8 * u + half_ulp);
  const at::Tensor slope_error = delta / 2 + delta * ax * 0.8 * (1 + 0.134 * ax * ax) + 2 * u * ax;
  const at::Tensor dy_fp32_bound = ag * slope_error + ref.dy.abs() * 8 * u;
  const at::Tensor dy_bound = dy_fp32_bound + ref.dy.abs() * half_ulp;
  const at::Tensor db_bound = dy_fp32_bound.reshape({-1, 70}).sum(0) + 150 * u * ref.dy.abs().reshape({-1, 70}).sum(0);
  EXPECT_EQ(outside(out, ref.out, out_bound), 0);
  EXPECT_EQ(outside(yv.grad(), ref.dy, dy_bound), 0);
  EXPECT_EQ(outside(b.grad(), ref.db, db_bound), 0);
}

// fp16 has no pass of its own: ATen's ops compute it, as on devices other than the CPU.
TEST(BiasGeluTest, OtherTypesTakeAtensOps) {
  const at::Tensor y = seeded_randn({40, 24}, 4).to(at::kHalf).requires_grad_(), g = seeded_randn({40, 24}, 5).to(at::kHalf);
  const at::Tensor b = seeded_randn({24}, 6).requires_grad_();
  const at::Tensor out = bias_gelu_tanh(y, b, precision(at::kHalf));
  out.backward(g);
  const BiasGeluReference ref = bias_gelu_reference(y.detach(), b.detach(), g);
  EXPECT_LE((out.to(at::kDouble) - ref.out).abs().max().item<double>(), 4e-3);
  EXPECT_LE((y.grad().to(at::kDouble) - ref.dy).abs().max().item<double>(), 8e-3);
  EXPECT_LE((b.grad().to(at::kDouble) - ref.db).abs().max().item<double>(), 40 * 8e-3);
}

// The bias gradient sums fixed blocks of rows: the same bits on one thread as on two.
TEST(BiasGeluTest, BiasGradientDoesNotDependOnTheThreadCount) {
  const at::Tensor y = seeded_randn({1000, 96}, 7).to(at::kBFloat16), g = seeded_randn({1000, 96}, 8).to(at::kBFloat16);
  const at::Tensor b = seeded_randn({96}, 9);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const BiasGeluGrads one = bias_gelu_backward_cpu(g, y, b, true);
  at::set_num_threads(2);
  const BiasGeluGrads two = bias_gelu_backward_cpu(g, y, b, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one.bias, two.bias));
  EXPECT_TRUE(at::equal(one.input, two.input));
}

// On a GPU linear_gelu_tanh takes cuBLASLt's paths (bias_gelu.cpp): a forward without gradients
// computes bias + GELU in the GEMM's epilogue (_addmm_activation); training adds the bias in the
// GEMM (at::linear) and runs ATen's GELU after it. Both against the fp64 reference from the same
// bf16 operands, per element: the bias rounded to bf16 (2⁻⁹|b|) and, on the training path, the
// GEMM's output too (2⁻⁹|y|), moved through GELU's slope (< 1.13), the output's own rounding
// (2⁻⁹|out|), doubled for the fp32 steps in between (2⁻⁸). Gradients: the output gradient moves by
// |g|·|GELU''| (< 0.8) times y's error and its own rounding, then the input gradient sums it over
// |W| and rounds, the bias gradient sums it in fp32.
TEST(BiasGeluTest, OnAGpuBothCublasPathsFollowTheUnfusedReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const at::Device gpu(at::kCUDA, 0);
  LinearImpl layer(64, 96, true);
  {
    at::NoGradGuard no_grad;
    layer.weight.copy_(seeded_randn({96, 64}, 10) * 0.2);
    layer.bias.copy_(seeded_randn({96}, 11) * 0.5);
  }
  layer.to(gpu);
  layer.set_precision(MixedPrecision::make(at::kBFloat16, gpu));
  layer.refresh_working_copy();
  const at::Tensor x = seeded_randn({3, 50, 64}, 12), g = seeded_randn({3, 50, 96}, 13).to(at::kBFloat16);

  const at::Tensor x64 = x.to(at::kBFloat16).to(at::kDouble).requires_grad_(), w64 = layer.working.cpu().to(at::kDouble);
  const at::Tensor b64 = layer.bias.detach().cpu().to(at::kDouble).requires_grad_();
  const at::Tensor y64 = at::matmul(x64, w64.t()) + b64, ref = at::gelu(y64, "tanh");
  ref.backward(g.to(at::kDouble));
  const at::Tensor dy64 = at::gelu_backward(g.to(at::kDouble), y64.detach(), "tanh");
  const double r = std::ldexp(1.0, -8);
  const at::Tensor y_error = r * (y64.detach().abs() + b64.detach().abs());
  const at::Tensor out_bound = 1.13 * y_error + r * ref.detach().abs() + 1e-6;
  const at::Tensor dy_error = 0.8 * g.to(at::kDouble).abs() * y_error + r * dy64.abs();
  const at::Tensor dx_bound = at::matmul(dy_error, w64.abs()) + r * x64.grad().abs() + 1e-6;
  const at::Tensor db_bound = dy_error.reshape({-1, 96}).sum(0) + 150 * std::ldexp(1.0, -24) * dy64.abs().reshape({-1, 96}).sum(0) + 1e-6;

  {
    at::NoGradGuard no_grad;
    const at::Tensor epilogue = linear_gelu_tanh(layer, x.to(gpu));
    EXPECT_EQ(outside(epilogue.cpu(), ref.detach(), out_bound), 0);
  }
  const at::Tensor xv = x.to(gpu).requires_grad_();
  const at::Tensor out = linear_gelu_tanh(layer, xv);
  EXPECT_EQ(outside(out.cpu(), ref.detach(), out_bound), 0);
  out.backward(g.to(gpu));
  ASSERT_TRUE(xv.grad().defined() && layer.bias.grad().defined());
  EXPECT_EQ(outside(xv.grad().cpu(), x64.grad(), dx_bound), 0);
  EXPECT_EQ(outside(layer.bias.grad().cpu(), b64.grad(), db_bound), 0);
}

INSTANTIATE_TEST_SUITE_P(Types, BiasGeluPrecisionTest, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(info.param == at::kFloat ? "fp32" : "bf16"); });

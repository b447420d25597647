// The fp32 linear layer on oneDNN's inner product against at::linear on MKL: the same values and gradients
// within fp32 rounding (the two libraries sum in other orders), with and without bias, and with a
// frozen weight; and that the CPU build really takes oneDNN.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include "model/linear_gemm.h"

using namespace dtrain;

namespace {

at::Tensor seeded_normal(std::initializer_list<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen);
}

// Per element |got - expected| <= atol + rtol·|expected|: sums of up to 64 products of unit normals,
// each rounded once per addition in fp32 (2^-24 relative), in two summation orders, differ by far
// less than 1e-5 of the sum's scale (measured: at most 0.37 of this bound over 200 seeds); a
// transposed or missing operand moves elements by their own size.
void expect_within_fp32(const at::Tensor& got, const at::Tensor& expected, const char* what) {
  ASSERT_EQ(got.sizes(), expected.sizes()) << what;
  const double atol = 1e-5, rtol = 1e-5;
  EXPECT_LE(((got - expected).abs() - (atol + rtol * expected.abs())).max().item<double>(), 0) << what;
}

}  // namespace

TEST(LinearFp32, MatchesAtenLinearInValuesAndGradients) {
  for (const bool with_bias : {true, false})
    for (const bool frozen_weight : {false, true}) {
      const at::Tensor x0 = seeded_normal({3, 5, 64}, 1), w0 = seeded_normal({48, 64}, 2), b0 = with_bias ? seeded_normal({48}, 3) : at::Tensor(), g = seeded_normal({3, 5, 48}, 4);
      auto leaf = [](const at::Tensor& t, bool grad) { return t.defined() ? t.clone().requires_grad_(grad) : at::Tensor(); };
      const at::Tensor x = leaf(x0, true), w = leaf(w0, !frozen_weight), b = leaf(b0, true);
      const at::Tensor rx = leaf(x0, true), rw = leaf(w0, !frozen_weight), rb = leaf(b0, true);
      const at::Tensor y = linear_fp32(x, w, b), expected = at::linear(rx, rw, rb);
      expect_within_fp32(y, expected, "output");
      y.backward(g);
      expected.backward(g);
      expect_within_fp32(x.grad(), rx.grad(), "input gradient");
      EXPECT_EQ(w.grad().defined(), !frozen_weight);
      if (!frozen_weight) expect_within_fp32(w.grad(), rw.grad(), "weight gradient");
      if (with_bias) expect_within_fp32(b.grad(), rb.grad(), "bias gradient");
    }
}

TEST(LinearFp32, TakesOneDnnForContiguousFp32OnTheCpuOnly) {
  if (!onednn_available()) GTEST_SKIP() << "this LibTorch has no oneDNN";
  EXPECT_TRUE(matmul_nt_uses_onednn(at::zeros({2, 3})));
  EXPECT_FALSE(matmul_nt_uses_onednn(at::zeros({2, 3}).t()));  // a weight gradient's operand: MKL reads it in place
  EXPECT_FALSE(matmul_nt_uses_onednn(at::zeros({2, 2}, at::kDouble)));
  EXPECT_FALSE(matmul_nt_uses_onednn(at::zeros({2, 2}, at::kBFloat16)));
}

// The fused residual add and norm (model/fused/residual_norm.h) against the ops it replaces, each
// with ATen's autograd: values and every gradient, LayerNorm and RMSNorm, with and without the
// linear's bias, the product in fp32 and bf16, the add and norm together and each alone.
//
// The reference is today's ops on the product widened to fp32 (with autograd through the cast):
// the fused add sums product + bias in fp32, where the linear's bias add rounded that sum to the
// compute type first, so it is the more exact of the two; against the widened product both compute
// the same fp32 arithmetic in other orders. Tolerances, per element |got − expected| ≤ atol +
// rtol·|expected|: h (the same fp32 adds, in the same order) exact; n and the input gradient 1e-5 +
// 1e-5·|·| (row sums of 64 fp32 terms in another order); the product's bf16 gradient one unit in
// the last place apart at most (2⁻⁷·|·|, plus 1e-6), where the two fp32 gradients it rounds differ in
// their last bits; the sums over the 96 rows (bias, norm weight and bias)
// 1e-4 + 1e-5·|·|.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <string>
#include <tuple>

#include "model/fused/residual_norm.h"

using namespace dtrain;

namespace residual_norm_test {

at::Tensor randn(std::initializer_list<int64_t> shape, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen) * scale + shift;
}

enum class Part { AddAndNorm, AddOnly, NormOnly };

struct Leaves {
  at::Tensor x, product, bias, weight, norm_bias;
};

constexpr int64_t B = 3, T = 32, D = 64;

Leaves leaves(bool rms, bool bias, at::ScalarType dtype) {
  Leaves l;
  l.x = randn({B, T, D}, 1).requires_grad_();
  l.product = randn({B, T, D}, 2).to(dtype).requires_grad_();
  if (bias) l.bias = randn({D}, 3, 0.1).requires_grad_();
  l.weight = randn({D}, 4, 0.1, 1.0).requires_grad_();
  if (!rms) l.norm_bias = randn({D}, 5, 0.1).requires_grad_();
  return l;
}

Leaves copy(const Leaves& l) {
  Leaves c;
  auto leaf = [](const at::Tensor& t) { return t.defined() ? t.detach().clone().requires_grad_() : at::Tensor(); };
  c.x = leaf(l.x), c.product = leaf(l.product), c.bias = leaf(l.bias), c.weight = leaf(l.weight), c.norm_bias = leaf(l.norm_bias);
  return c;
}

NormParams norm_of(const Leaves& l, bool rms) { return {rms, l.weight, l.norm_bias, 1e-5}; }

// h and n (either undefined where the part has none).
std::pair<at::Tensor, at::Tensor> fused_outputs(const Leaves& l, bool rms, Part part) {
  const ResidualAdd add{l.x, l.product, l.bias};
  if (part == Part::AddOnly) return {add_residual(add), at::Tensor()};
  if (part == Part::NormOnly) return {at::Tensor(), normalize(l.x, norm_of(l, rms))};
  const ResidualAndNorm out = add_residual_and_norm(add, norm_of(l, rms));
  return {out.residual, out.normed};
}

std::pair<at::Tensor, at::Tensor> unfused_outputs(const Leaves& l, bool rms, Part part) {
  if (part == Part::NormOnly) return {at::Tensor(), unfused_norm(l.x, norm_of(l, rms))};
  const at::Tensor h = unfused_residual({l.x, l.product.to(at::kFloat), l.bias});
  return {h, part == Part::AddOnly ? at::Tensor() : unfused_norm(h, norm_of(l, rms))};
}

// A loss that sends a gradient into each output: Σ h·gh + Σ n·gn.
void backward(const std::pair<at::Tensor, at::Tensor>& out) {
  at::Tensor loss = at::zeros({});
  if (out.first.defined()) loss = loss + (out.first * randn({B, T, D}, 6)).sum();
  if (out.second.defined()) loss = loss + (out.second * randn({B, T, D}, 7)).sum();
  loss.backward();
}

void expect_close(const at::Tensor& got, const at::Tensor& expected, double atol, double rtol, const std::string& what) {
  ASSERT_TRUE(got.defined() && expected.defined()) << what;
  ASSERT_EQ(got.scalar_type(), expected.scalar_type()) << what;
  ASSERT_EQ(got.sizes(), expected.sizes()) << what;
  const at::Tensor g = got.to(at::kFloat), e = expected.to(at::kFloat);
  const at::Tensor excess = (g - e).abs() - (atol + rtol * e.abs());
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": worst element off by " << (g - e).abs().max().item<double>();
}

using Case = std::tuple<bool /*rms*/, bool /*linear bias*/, at::ScalarType, Part>;

std::string case_name(const Case& c) {
  const char* parts[] = {"AddAndNorm", "AddOnly", "NormOnly"};
  return std::string(std::get<0>(c) ? "RmsNorm" : "LayerNorm") + (std::get<1>(c) ? "Bias" : "NoBias") +
         (std::get<2>(c) == at::kFloat ? "Fp32" : "Bf16") + parts[static_cast<int>(std::get<3>(c))];
}

class FusedResidualNormTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedResidualNormTest, ValuesAndGradientsMatchTheUnfusedOps) {
  const auto [rms, bias, dtype, part] = GetParam();
  const Leaves a = leaves(rms, bias && part != Part::NormOnly, dtype), b = copy(a);
  const auto got = fused_outputs(a, rms, part), expected = unfused_outputs(b, rms, part);
  if (part != Part::NormOnly) {
    EXPECT_TRUE(at::equal(got.first, expected.first)) << "h";
  }
  if (part != Part::AddOnly) expect_close(got.second, expected.second, 1e-5, 1e-5, "n");
  backward(got);
  backward(expected);
  if (part != Part::NormOnly) {
    expect_close(a.product.grad(), b.product.grad(), 1e-6, dtype == at::kFloat ? 1e-5 : 1.0 / 128, "the product's gradient");
    if (a.bias.defined()) expect_close(a.bias.grad(), b.bias.grad(), 1e-4, 1e-5, "the bias's gradient");
  }
  expect_close(a.x.grad(), b.x.grad(), 1e-5, 1e-5, "x's gradient");
  if (part != Part::AddOnly) {
    expect_close(a.weight.grad(), b.weight.grad(), 1e-4, 1e-5, "the norm weight's gradient");
    if (a.norm_bias.defined()) expect_close(a.norm_bias.grad(), b.norm_bias.grad(), 1e-4, 1e-5, "the norm bias's gradient");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedResidualNormTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Values(at::kFloat, at::kBFloat16),
                                            ::testing::Values(Part::AddAndNorm, Part::AddOnly, Part::NormOnly)),
                         [](const auto& info) { return case_name(info.param); });

// Mixed precision's round_gradients: the bias's gradient, an fp32 sum, is rounded through the
// compute type as a weight's is.
TEST(FusedResidualNorm, TheBiasGradientIsRoundedThroughTheTypeAsked) {
  const Leaves a = leaves(false, true, at::kBFloat16), b = copy(a);
  backward({add_residual({a.x, a.product, a.bias, at::kBFloat16}), at::Tensor()});
  backward({add_residual({b.x, b.product, b.bias}), at::Tensor()});
  EXPECT_FALSE(at::equal(a.bias.grad(), b.bias.grad()));
  EXPECT_TRUE(at::equal(a.bias.grad(), b.bias.grad().to(at::kBFloat16).to(at::kFloat)));
}

}  // namespace residual_norm_test

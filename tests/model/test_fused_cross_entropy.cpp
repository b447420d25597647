// The fused softmax cross-entropy (model/fused/softmax_cross_entropy.h) against ATen's
// cross_entropy on the logits widened to fp32 (the loss as computed before it), with autograd
// through the cast: the loss and the logits' gradient, fp32, bf16 and fp16 logits, rows whose target
// is the ignore index left out of the mean. Tolerances: the loss 1e-5 relative (row sums of fp32
// exponentials in another order, and exp_approx's error below); the gradient, per element, 1e-9 +
// 1e-5·|·| in fp32, and in 16 bits one unit in the last place apart at most, where the reference
// rounds an fp32 gradient that may differ in its last bits the other way: 2⁻⁷·|·| for bf16, 2⁻¹⁰·|·|
// for fp16 plus its subnormal step, 2⁻²⁴ (the gradient's smallest elements, ~1e-7, are subnormal).
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/types.h>

#include <cmath>

#include "model/fused/softmax_cross_entropy.h"
#include "model/fused/softmax_cross_entropy_kernel.h"
#include "model/loss.h"

using namespace dtrain;

namespace cross_entropy_test {

constexpr int64_t kRows = 48, kVocab = 1000;

at::Tensor logits(at::ScalarType dtype) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  return (at::randn({kRows, kVocab}, gen) * 3).to(dtype);
}

at::Tensor targets() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  at::Tensor t = at::randint(kVocab, {kRows}, gen, at::kLong);
  t.index_put_({at::arange(0, kRows, 7)}, -100);  // some rows ignored
  return t;
}

at::Tensor reference_loss(const at::Tensor& logits, const at::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.to(at::kFloat), targets);
}

class FusedCrossEntropyTest : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(FusedCrossEntropyTest, LossAndGradientMatchCrossEntropyOnWidenedLogits) {
  const at::ScalarType dtype = GetParam();
  const at::Tensor a = logits(dtype).requires_grad_(), b = a.detach().clone().requires_grad_(), t = targets();
  const at::Tensor got = fused_cross_entropy(a, t), expected = reference_loss(b, t);
  EXPECT_EQ(got.scalar_type(), at::kFloat);
  EXPECT_NEAR(got.item<double>(), expected.item<double>(), 1e-5 * std::abs(expected.item<double>()));
  // A gradient other than 1, so that g reaches the scale.
  (got * 0.7).backward();
  (expected * 0.7).backward();
  ASSERT_EQ(a.grad().scalar_type(), dtype);
  const double rtol = dtype == at::kFloat ? 1e-5 : dtype == at::kHalf ? 1.0 / 1024 : 1.0 / 128;
  const double atol = dtype == at::kHalf ? std::ldexp(1.0, -24) : 1e-9;
  const at::Tensor g = a.grad().to(at::kFloat), e = b.grad().to(at::kFloat);
  const at::Tensor excess = (g - e).abs() - (atol + rtol * e.abs());
  EXPECT_LE(excess.max().item<double>(), 0.0) << "worst element off by " << (g - e).abs().max().item<double>();
  EXPECT_TRUE(at::equal(a.grad().index_select(0, at::arange(0, kRows, 7)), at::zeros({(kRows + 6) / 7, kVocab}, dtype)));
}

INSTANTIATE_TEST_SUITE_P(Formats, FusedCrossEntropyTest, ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

// next_token_loss takes [batch, T, vocab] logits and [batch, T] targets, and runs the fused path on the CPU.
TEST(FusedCrossEntropy, NextTokenLossIsTheFusedLossOfTheFlattenedRows) {
  const at::Tensor l = logits(at::kBFloat16), t = targets();
  EXPECT_TRUE(at::equal(next_token_loss(l.view({6, 8, kVocab}), t.view({6, 8})), fused_cross_entropy(l, t)));
}

TEST(FusedCrossEntropy, ATargetOutsideTheVocabularyIsAnError) {
  at::Tensor t = targets();
  t[3] = kVocab;
  EXPECT_THROW(fused_cross_entropy(logits(at::kFloat), t), c10::Error);
}

// exp_approx's stated error: at most 3e-7 relative over [−87, 0] (the range softmax feeds it).
TEST(FusedCrossEntropy, ExpApproximationIsWithinItsStatedError) {
  double worst = 0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 870000.0f;
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(fused::exp_approx(x) - exact) / exact);
  }
  EXPECT_LE(worst, 3e-7);
  // Below fp32's normal range it stays at e^−87.3: a softmax term of at most 1.3e-38.
  EXPECT_LE(fused::exp_approx(-100.0f), 1.3e-38f);
  EXPECT_GE(fused::exp_approx(-100.0f), 0.0f);
}

}  // namespace cross_entropy_test

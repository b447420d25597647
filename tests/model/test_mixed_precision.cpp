// Mixed precision's building blocks: the 16-bit linear against its definition (operands rounded to
// 16 bits, products and sums in fp32, the output rounded), gradients reaching the fp32 masters, the
// working copy refreshed only when asked, and the model in bf16 against the model in fp32.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <cmath>

#include "model/linear_gemm.h"
#include "model/loss.h"
#include "model/mixed_precision.h"
#include "model/transformer.h"
#include "support/seeded_randn.h"

using namespace dtrain;

namespace {

using test::seeded_randn;

at::Tensor widened(const at::Tensor& t, at::ScalarType dtype) { return t.to(dtype).to(at::kFloat); }

MixedPrecision precision(at::ScalarType dtype, bool native) {
  MixedPrecision mp = MixedPrecision::make(dtype, at::Device(at::kCPU));
  mp.native_gemm = native;
  return mp;
}

}  // namespace

class MixedLinearTest : public ::testing::TestWithParam<at::ScalarType> {};

// On the widened path the result is exactly the definition: every product of two 16-bit values is
// exact in fp32, and the layers' own fp32 GEMM (linear_gemm.h) sums them in the same order either
// way. (at::matmul is another kernel, MKL's, whose order differs from oneDNN's on some CPUs.)
TEST_P(MixedLinearTest, WidenedPathIsTheDefinitionAndGradientsReachTheFp32Master) {
  const at::ScalarType dtype = GetParam();
  const MixedPrecision mp = precision(dtype, /*native=*/false);
  const at::Tensor x = seeded_randn({3, 5, 16}, 1).requires_grad_(), w = seeded_randn({8, 16}, 2).requires_grad_(), b = seeded_randn({8}, 3).requires_grad_();
  const at::Tensor working = w.detach().to(dtype);
  const at::Tensor y = mixed_linear(mp, x, w, working, b);
  EXPECT_EQ(y.scalar_type(), dtype);
  const at::Tensor expected = (matmul_nt(widened(x.detach(), dtype), widened(w.detach(), dtype)) + b.detach()).to(dtype);
  EXPECT_TRUE(at::equal(y, expected));

  const at::Tensor g = seeded_randn({3, 5, 8}, 4);
  y.backward(g.to(dtype));
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().scalar_type(), at::kFloat);  // the master's, unrounded
  const at::Tensor g2 = widened(g, dtype).reshape({-1, 8}), x2 = widened(x.detach(), dtype).reshape({-1, 16});
  EXPECT_TRUE(at::equal(w.grad(), at::matmul(g2.t(), x2)));
  EXPECT_TRUE(at::equal(b.grad(), g2.sum(0)));
  EXPECT_TRUE(at::equal(x.grad(), widened(at::matmul(g2, widened(w.detach(), dtype)), dtype).view({3, 5, 16})));
  EXPECT_FALSE(working.grad().defined());
}

// The native 16-bit GEMM (CUDA, AVX512-BF16 CPUs) rounds in other places; it must agree with the
// widened path within a few 16-bit roundings of the output's magnitude.
TEST_P(MixedLinearTest, NativeAndWidenedPathsAgreeWithinSixteenBitRounding) {
  const at::ScalarType dtype = GetParam();
  const double eps = dtype == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;  // 2^-7, 2^-10: one ulp at 1.0
  const at::Tensor x = seeded_randn({4, 32}, 5), w = seeded_randn({6, 32}, 6);
  const at::Tensor native = mixed_linear(precision(dtype, true), x, w, w.to(dtype), at::Tensor()).to(at::kFloat);
  const at::Tensor wide = mixed_linear(precision(dtype, false), x, w, w.to(dtype), at::Tensor()).to(at::kFloat);
  // Output magnitude ~ sqrt(32); allow two output roundings plus fp32 noise.
  EXPECT_LE((native - wide).abs().max().item<double>(), 2 * eps * wide.abs().max().item<double>());
}

// On the native path the bias gradient is summed into fp32 by the reduction itself; it must be the fp32 sum of the widened gradient, up to the order of the fp32 additions: 512
// tokens of |g| <= ~4 sum to at most ~2000, whose fp32 ulp is 2^-13, so a few ulps is 1e-3.
TEST_P(MixedLinearTest, NativeBiasGradientIsTheFp32SumOfTheSixteenBitGradient) {
  const at::ScalarType dtype = GetParam();
  const at::Tensor x = seeded_randn({8, 64, 32}, 7).requires_grad_(), w = seeded_randn({24, 32}, 8).requires_grad_(), b = seeded_randn({24}, 9).requires_grad_();
  const at::Tensor g = seeded_randn({8, 64, 24}, 10).to(dtype);
  mixed_linear(precision(dtype, true), x, w, w.detach().to(dtype), b).backward(g);
  ASSERT_TRUE(b.grad().defined());
  EXPECT_EQ(b.grad().scalar_type(), at::kFloat);
  const at::Tensor expected = g.to(at::kFloat).reshape({-1, 24}).sum(0);
  EXPECT_LE((b.grad() - expected).abs().max().item<double>(), 1e-3);
  // and not the sum rounded to 16 bits, which would miss by up to half a 16-bit ulp of ~50
  EXPECT_FALSE(at::equal(b.grad(), expected.to(dtype).to(at::kFloat)));
}

// Three linears reading one input cast once (MixedPrecision::matmul_input) against each casting
// its own: the outputs are the same bits, and the input gradient differs only in that the three
// 16-bit gradients are summed in 16 bits before the one widening: at most two roundings of the
// partial sums, each within half a 16-bit ulp (2^-8 relative for bf16, 2^-11 for fp16) of a
// partial sum bounded by the sum of the three gradients' magnitudes.
TEST_P(MixedLinearTest, OneCastForSeveralLinearsFollowsACastPerLinear) {
  const at::ScalarType dtype = GetParam();
  const MixedPrecision mp = precision(dtype, true);
  const double half_ulp = dtype == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  std::vector<at::Tensor> ws;
  for (uint64_t i = 0; i < 3; ++i) ws.push_back(seeded_randn({16, 32}, 20 + i));
  const at::Tensor g = seeded_randn({4, 8, 16}, 30).to(dtype);
  // Returns the outputs and x's gradient; `parts` gets each linear's share of the gradient.
  auto run = [&](bool once, std::vector<at::Tensor>* parts) {
    const at::Tensor x = seeded_randn({4, 8, 32}, 31).requires_grad_();
    const at::Tensor in = once ? mp.matmul_input(x) : x;
    std::vector<at::Tensor> ys;
    for (const auto& w : ws) ys.push_back(mixed_linear(mp, in, w, w.to(dtype), at::Tensor()));
    if (parts)
      for (const auto& y : ys) parts->push_back(torch::autograd::grad({y}, {x}, {g}, /*retain_graph=*/true)[0]);
    torch::autograd::backward(ys, {g, g, g});
    return std::make_pair(ys, x.grad());
  };
  std::vector<at::Tensor> parts;
  const auto [ref_y, ref_grad] = run(false, &parts);
  const auto [y, grad] = run(true, nullptr);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(y[i], ref_y[i])) << "output " << i;
  EXPECT_EQ(grad.scalar_type(), at::kFloat);
  const at::Tensor bound = 2 * half_ulp * (parts[0].abs() + parts[1].abs() + parts[2].abs()) + 1e-6;
  EXPECT_TRUE(((grad - ref_grad).abs() <= bound).all().item<bool>())
      << "largest difference " << (grad - ref_grad).abs().max().item<double>();
}

INSTANTIATE_TEST_SUITE_P(Formats, MixedLinearTest, ::testing::Values(at::kBFloat16, at::kHalf),
                         [](const auto& info) { return precision_name(info.param); });

TEST(MixedPrecision, TheWorkingCopyChangesOnlyWhenRefreshed) {
  TransformerConfig c = model_preset("tiny");
  Transformer model(c, 3);
  model->set_precision(MixedPrecision::make(at::kBFloat16, at::Device(at::kCPU)));
  const at::Tensor tokens = at::randint(c.vocab_size, {2, c.seq_len}, at::kLong);
  at::NoGradGuard no_grad;
  const at::Tensor before = model->forward(tokens);
  auto& q = model->named_parameters()["blocks.0.q_proj.weight"];
  q.mul_(1.5);
  EXPECT_TRUE(at::equal(model->forward(tokens), before)) << "the master changed the forward pass before a refresh";
  model->refresh_working_copy();
  EXPECT_FALSE(at::equal(model->forward(tokens), before));
}

// The bf16 model computes what the fp32 model computes, to bf16's precision: the loss within 1%
// (a few roundings of 2^-9 through 2 layers) and each gradient within 5% of its own norm, which a
// gradient lost or left scaled would far exceed. A gradient that is zero in exact arithmetic (the
// key bias's: softmax ignores what a row's scores share) is what rounding leaves: each element may be
// off by one 16-bit rounding of the model's typical gradient, ε·rms over sqrt(numel) of them.
TEST(MixedPrecision, TheModelInSixteenBitsFollowsTheModelInFp32) {
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    for (const std::string arch : {"gpt2", "llama"}) {
      TransformerConfig c = model_preset("tiny");
      c.arch = arch;
      Transformer reference(c, 11), mixed(c, 11);
      mixed->set_precision(MixedPrecision::make(dtype, at::Device(at::kCPU)));
      auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
      const at::Tensor tokens = at::randint(c.vocab_size, {4, c.seq_len}, gen, at::kLong);
      const at::Tensor targets = at::randint(c.vocab_size, {4, c.seq_len}, gen, at::kLong);
      const at::Tensor ref_loss = next_token_loss(reference->forward(tokens), targets);
      const at::Tensor loss = next_token_loss(mixed->forward(tokens), targets);
      EXPECT_EQ(loss.scalar_type(), at::kFloat);
      EXPECT_NEAR(loss.item<double>(), ref_loss.item<double>(), 0.01 * ref_loss.item<double>()) << arch;
      ref_loss.backward();
      loss.backward();
      const auto ref_params = reference->named_parameters();
      double squares = 0, count = 0;
      for (const auto& item : ref_params) squares += item.value().grad().pow(2).sum().item<double>(), count += item.value().numel();
      const double rounding = (dtype == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048) * std::sqrt(squares / count);  // ε·rms
      for (const auto& item : mixed->named_parameters()) {
        const at::Tensor expected = ref_params[item.key()].grad();
        ASSERT_TRUE(item.value().grad().defined()) << arch << " " << item.key();
        EXPECT_EQ(item.value().grad().scalar_type(), at::kFloat);
        EXPECT_LE((item.value().grad() - expected).norm().item<double>(),
                  0.05 * expected.norm().item<double>() + rounding * std::sqrt(double(expected.numel())))
            << precision_name(dtype) << " " << arch << " " << item.key();
      }
    }
  }
}

// The CPU flash-attention kernel for 16-bit tensors against attention in fp64 on the same (16-bit)
// inputs: out, lse and the three gradients, causal and not, grouped-query heads, sequences that do
// not fill a block, and a backward handed the out/lse of more keys than it sees (ring attention's).
//
// Tolerance, per element: |got - expected| <= 2u·(bound + |expected|) + 1e-6, u = 2^-8 the unit
// roundoff of bf16 (2^-11 for fp16). The kernel rounds to 16 bits the probabilities P before P·v and
// Pᵀ·dout, the score gradient dS before dS·k and dSᵀ·q, and the outputs; each product's error is then
// at most u times the sum of its terms' magnitudes, which is `bound` (e.g. P·|v| for out), and D =
// rowsum(dout·out) reads the 16-bit out, an error of u·rowsum(|dout|·|out|) inside dS. Sums are fp32
// (exact products of 16-bit values), far below u. lse: 1e-5·(1 + |lse|) (fp32 sums and exp); ATen's
// forward kernel (FlashForward::ATen) gets 1e-4 absolute, its vectorised exp being coarser than ours
// (measured 5.6e-5 on 200 keys), which makes P = exp(s - lse) in the backward off by a relative 1e-4,
// 40 times under bf16's u, inside the gradients' bounds.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <vector>

#include "model/fused/flash_attention.h"
#include "model/fused/flash_softmax.h"
#include "support/seeded_randn.h"

using namespace dtrain;

namespace {

using test::seeded_randn;

struct Reference {
  at::Tensor out, lse, dq, dk, dv;                 // fp64
  at::Tensor out_bound, dq_bound, dk_bound, dv_bound;  // sums of the magnitudes of each product's terms
};

// Attention and its gradients in fp64, written out (checked against autograd below); k, v expanded
// per query head and their gradients summed back over the heads that share them.
Reference reference(const at::Tensor& q16, const at::Tensor& k16, const at::Tensor& v16, const at::Tensor& dout16, bool causal) {
  const int64_t H = q16.size(1), group = H / k16.size(1), Tq = q16.size(2), Tk = k16.size(2);
  const double scale = 1.0 / std::sqrt(double(q16.size(3)));
  auto q = q16.to(at::kDouble), k = k16.to(at::kDouble).repeat_interleave(group, 1), v = v16.to(at::kDouble).repeat_interleave(group, 1);
  auto dout = dout16.to(at::kDouble);
  auto s = at::matmul(q, k.transpose(-1, -2)) * scale;
  if (causal) s = s.masked_fill(at::ones({Tq, Tk}, at::kBool).triu(1), -INFINITY);
  auto lse = at::logsumexp(s, -1);
  auto p = at::exp(s - lse.unsqueeze(-1));
  auto out = at::matmul(p, v);
  auto d = (dout * out).sum(-1, true);
  auto ds = p * (at::matmul(dout, v.transpose(-1, -2)) - d);
  auto ds_bound = ds.abs() + p * (dout.abs() * out.abs()).sum(-1, true);
  auto per_kv = [&](const at::Tensor& t) {
    const auto z = t.sizes();
    return t.view({z[0], z[1] / group, group, z[2], z[3]}).sum(2);
  };
  return {out,
          lse,
          at::matmul(ds, k) * scale,
          per_kv(at::matmul(ds.transpose(-1, -2), q) * scale),
          per_kv(at::matmul(p.transpose(-1, -2), dout)),
          at::matmul(p, v.abs()),
          at::matmul(ds_bound, k.abs()) * scale,
          per_kv(at::matmul(ds_bound.transpose(-1, -2), q.abs()) * scale),
          per_kv(at::matmul(p.transpose(-1, -2), dout.abs()))};
}

double unit_roundoff(at::ScalarType t) { return t == at::kHalf ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

void expect_within(const at::Tensor& got, const at::Tensor& expected, const at::Tensor& bound, double u, const char* what) {
  const auto err = (got.to(at::kDouble) - expected).abs();
  const auto tol = 2 * u * (bound + expected.abs()) + 1e-6;
  const auto excess = (err - tol).max().item<double>();
  EXPECT_LE(excess, 0) << what << ": max error " << err.max().item<double>() << ", largest expected "
                       << expected.abs().max().item<double>();
}

struct Case {
  int64_t B, H, KV, T, hd;
  bool causal;
  at::ScalarType type = at::kBFloat16;
  FlashForward forward = FlashForward::Ours;  // each kernel checked on every CPU, whichever Fastest picks
};

// q in the layout the model hands over ([B,T,H,hd] memory seen as [B,H,T,hd]); k, v contiguous.
void check(const Case& c) {
  auto q = seeded_randn({c.B, c.T, c.H, c.hd}, 1).to(c.type).transpose(1, 2);
  auto k = seeded_randn({c.B, c.KV, c.T, c.hd}, 2).to(c.type), v = seeded_randn({c.B, c.KV, c.T, c.hd}, 3).to(c.type);
  auto dout = seeded_randn({c.B, c.H, c.T, c.hd}, 4).to(c.type);
  if (!flash_attention_serves(q, k, v)) GTEST_SKIP() << "no native 16-bit block GEMM on this CPU";
  const Reference ref = reference(q, k, v, dout, c.causal);
  const double u = unit_roundoff(c.type);
  auto [out, lse] = flash_attention_forward(q, k, v, c.causal, c.forward);
  expect_within(out, ref.out, ref.out_bound, u, "out");
  const auto lse_tol = c.forward == FlashForward::ATen ? at::full_like(ref.lse, 1e-4) : 1e-5 * (1 + ref.lse.abs());
  const auto lse_err = (lse.to(at::kDouble) - ref.lse).abs() - lse_tol;
  EXPECT_LE(lse_err.max().item<double>(), 0) << "lse";
  auto [dq, dk, dv] = flash_attention_backward(dout, q, k, v, out, lse, c.causal);
  ASSERT_EQ(dk.sizes(), k.sizes());
  expect_within(dq, ref.dq, ref.dq_bound, u, "dq");
  expect_within(dk, ref.dk, ref.dk_bound, u, "dk");
  expect_within(dv, ref.dv, ref.dv_bound, u, "dv");
}

}  // namespace

TEST(FlashAttention, CausalOverSeveralBlocksWithATail) { check({2, 4, 4, 165, 64, true}); }
TEST(FlashAttention, NotCausalOverSeveralBlocksWithATail) { check({2, 4, 4, 165, 64, false}); }
TEST(FlashAttention, GroupedQueryHeadsCausal) { check({1, 6, 2, 130, 32, true}); }
TEST(FlashAttention, GroupedQueryHeadsNotCausalOneKvHead) { check({2, 4, 1, 71, 64, false}); }
TEST(FlashAttention, SequenceShorterThanABlockOddLength) { check({2, 2, 2, 21, 16, true}); }
TEST(FlashAttention, HalfPrecision) { check({1, 2, 2, 100, 64, true, at::kHalf}); }
// ATen's forward, with our backward reading its out and log-sum-exp.
TEST(FlashAttention, ATenForwardCausalOverSeveralBlocksWithATail) { check({2, 4, 4, 165, 64, true, at::kBFloat16, FlashForward::ATen}); }
TEST(FlashAttention, ATenForwardNotCausalShorterThanABlock) { check({2, 2, 2, 21, 16, false, at::kBFloat16, FlashForward::ATen}); }

TEST(FlashAttention, ATenForwardRefusesGroupedQueryHeadsAndFastestKeepsOursThere) {
  auto q = seeded_randn({1, 4, 40, 32}, 17).to(at::kBFloat16), k = seeded_randn({1, 2, 40, 32}, 18).to(at::kBFloat16);
  auto v = seeded_randn({1, 2, 40, 32}, 19).to(at::kBFloat16);
  if (!flash_attention_serves(q, k, v)) GTEST_SKIP() << "no native 16-bit block GEMM on this CPU";
  EXPECT_THROW(flash_attention_forward(q, k, v, true, FlashForward::ATen), c10::Error);
  EXPECT_TRUE(at::equal(flash_attention_forward(q, k, v, true).out, flash_attention_forward(q, k, v, true, FlashForward::Ours).out));
}

// The fp64 reference's gradients are those autograd derives from its forward.
TEST(FlashAttention, ReferenceGradientsMatchAutograd) {
  auto q = seeded_randn({1, 4, 37, 16}, 5).to(at::kBFloat16), k = seeded_randn({1, 2, 37, 16}, 6).to(at::kBFloat16);
  auto v = seeded_randn({1, 2, 37, 16}, 7).to(at::kBFloat16), dout = seeded_randn({1, 4, 37, 16}, 8).to(at::kBFloat16);
  const Reference ref = reference(q, k, v, dout, true);
  auto qd = q.to(at::kDouble).requires_grad_(), kd = k.to(at::kDouble).requires_grad_(), vd = v.to(at::kDouble).requires_grad_();
  auto out = at::scaled_dot_product_attention(qd, kd.repeat_interleave(2, 1), vd.repeat_interleave(2, 1), {}, 0.0, true);
  auto grads = torch::autograd::grad({out}, {qd, kd, vd}, {dout.to(at::kDouble)});
  EXPECT_TRUE(at::allclose(out, ref.out, 1e-10, 1e-12));
  EXPECT_TRUE(at::allclose(grads[0], ref.dq, 1e-10, 1e-12));
  EXPECT_TRUE(at::allclose(grads[1], ref.dk, 1e-10, 1e-12));
  EXPECT_TRUE(at::allclose(grads[2], ref.dv, 1e-10, 1e-12));
}

// Ring attention's backward: each half of the keys gets the out and lse of all of them, and the halves'
// gradients make the full ones (dq summed, dk and dv side by side).
TEST(FlashAttention, BackwardWithTheGlobalOutAndLse) {
  const int64_t T = 100, half = 50;
  auto q = seeded_randn({2, 4, T, 64}, 9).to(at::kBFloat16), k = seeded_randn({2, 2, T, 64}, 10).to(at::kBFloat16);
  auto v = seeded_randn({2, 2, T, 64}, 11).to(at::kBFloat16), dout = seeded_randn({2, 4, T, 64}, 12).to(at::kBFloat16);
  if (!flash_attention_serves(q, k, v)) GTEST_SKIP() << "no native 16-bit block GEMM on this CPU";
  const Reference ref = reference(q, k, v, dout, false);
  const auto out = ref.out.to(at::kBFloat16), lse = ref.lse.to(at::kFloat);
  auto first = flash_attention_backward(dout, q, k.narrow(2, 0, half), v.narrow(2, 0, half), out, lse, false);
  auto second = flash_attention_backward(dout, q, k.narrow(2, half, half), v.narrow(2, half, half), out, lse, false);
  const double u = unit_roundoff(at::kBFloat16);
  // Two 16-bit dq halves rounded before their sum: one more rounding of the result.
  expect_within(first.dq.to(at::kDouble) + second.dq.to(at::kDouble), ref.dq, 1.5 * ref.dq_bound, u, "dq");
  expect_within(at::cat({first.dk, second.dk}, 2), ref.dk, ref.dk_bound, u, "dk");
  expect_within(at::cat({first.dv, second.dv}, 2), ref.dv, ref.dv_bound, u, "dv");
}

TEST(FlashAttention, AutogradFunctionGivesTheKernelsGradients) {
  auto q = seeded_randn({1, 2, 70, 64}, 13).to(at::kBFloat16), k = seeded_randn({1, 2, 70, 64}, 14).to(at::kBFloat16);
  auto v = seeded_randn({1, 2, 70, 64}, 15).to(at::kBFloat16), dout = seeded_randn({1, 2, 70, 64}, 16).to(at::kBFloat16);
  if (!flash_attention_serves(q, k, v)) GTEST_SKIP() << "no native 16-bit block GEMM on this CPU";
  auto qg = q.clone().requires_grad_(), kg = k.clone().requires_grad_(), vg = v.clone().requires_grad_();
  auto out = flash_attention(qg, kg, vg, true);
  auto grads = torch::autograd::grad({out}, {qg, kg, vg}, {dout});
  auto [fout, lse] = flash_attention_forward(q, k, v, true);
  auto direct = flash_attention_backward(dout, q, k, v, fout, lse, true);
  EXPECT_TRUE(at::equal(out, fout));
  EXPECT_TRUE(at::equal(grads[0], direct.dq));
  EXPECT_TRUE(at::equal(grads[1], direct.dk));
  EXPECT_TRUE(at::equal(grads[2], direct.dv));
}

TEST(FlashSoftmax, ExpIsWithinItsStatedErrorAndMasksToZero) {
  std::vector<float> x;
  for (double t = -87; t <= 88; t += 0.001) x.push_back(float(t));
  std::vector<float> y = x;
  flash::exp_and_sum(y.data(), int64_t(y.size()), 1.f, 0.f);
  double worst = 0;  // the error over its bound 3e-7 + 1e-7·|x|
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(y[i] / std::exp(double(x[i])) - 1) / (3e-7 + 1e-7 * std::abs(x[i])));
  EXPECT_LT(worst, 1.0);
  std::vector<float> masked = {-INFINITY, -200.f, 0.f};
  EXPECT_FLOAT_EQ(flash::exp_and_sum(masked.data(), 3, 1.f, 0.f), 1.f);
  EXPECT_EQ(masked[0], 0.f);
  EXPECT_EQ(masked[1], 0.f);
}

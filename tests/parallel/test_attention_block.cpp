// The fused block kernel on one process, against the fp64 formula: grouped-query heads without
// expanding k/v, the log-sum-exp it returns, the backward given the global out and lse of a split key
// range (what ring attention relies on), and the named refusal of a device without a kernel.
//
// Tolerances, per element atol + rtol*|want|, model fp32 arithmetic: each output is a softmax-weighted
// average of at most 12 values of order 1 (randn), accumulated in fp32 (eps 1.2e-7) through exp, a
// division and sums of a dozen terms, so a few tens of ulps of the largest term: atol 2e-6 with rtol
// 1e-5. The lse is a log of a sum of order-one exponentials: the same bound. A head served by the
// wrong kv head, or a block gradient taken with its own lse instead of the global one, is off by O(1).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attention_reference.h"
#include "parallel/context/attention_block.h"
#include "support/error_of.h"

namespace dtrain::test::attention_block_test {
namespace {

constexpr double kAtol = 2e-6, kRtol = 1e-5;

at::Tensor draw(std::vector<int64_t> shape, uint64_t seed) {
  return at::randn(shape, at::detail::createCPUGenerator(seed));
}

TEST(BlockAttention, GroupedQueryHeadsMatchTheFormula) {
  for (bool causal : {false, true}) {
    const at::Tensor q = draw({2, 6, 7, 8}, 1), k = draw({2, 2, 7, 8}, 2), v = draw({2, 2, 7, 8}, 3), dout = draw({2, 6, 7, 8}, 4);
    const AttentionReference want = reference_attention(q, k, v, dout, causal);
    const BlockAttention got = block_attention_forward(q, k, v, causal);
    EXPECT_EQ(got.lse.scalar_type(), at::kFloat);
    EXPECT_EQ(close_or_worst(got.out, want.out, kAtol, kRtol), "") << "causal " << causal;
    at::Tensor scores = at::matmul(q.to(at::kDouble), k.to(at::kDouble).repeat_interleave(3, 1).transpose(-1, -2)) / std::sqrt(8.0);
    if (causal) scores = scores.masked_fill(at::ones({7, 7}, at::kBool).triu(1), -INFINITY);
    EXPECT_EQ(close_or_worst(got.lse, scores.logsumexp(-1), kAtol, kRtol), "") << "causal " << causal;
    const BlockGradients g = block_attention_backward(dout, q, k, v, got.out, got.lse, causal);
    EXPECT_EQ(close_or_worst(g.dq, want.dq, kAtol, kRtol), "") << "causal " << causal;
    EXPECT_EQ(close_or_worst(g.dk, want.dk, kAtol, kRtol), "") << "causal " << causal;
    EXPECT_EQ(close_or_worst(g.dv, want.dv, kAtol, kRtol), "") << "causal " << causal;
  }
}

// Keys 0..4 and 5..11 as two blocks: merged by log-sum-exp they give the whole attention, and each
// block's backward with the merged out and lse gives its share of the whole gradient.
TEST(BlockAttention, SplitKeysMergeAndBackwardWithTheGlobalLse) {
  const at::Tensor q = draw({1, 4, 5, 8}, 5), k = draw({1, 2, 12, 8}, 6), v = draw({1, 2, 12, 8}, 7), dout = draw({1, 4, 5, 8}, 8);
  const AttentionReference want = reference_attention(q, k, v, dout, false);
  const BlockAttention a = block_attention_forward(q, k.narrow(2, 0, 5), v.narrow(2, 0, 5), false);
  const BlockAttention b = block_attention_forward(q, k.narrow(2, 5, 7), v.narrow(2, 5, 7), false);
  const at::Tensor lse = at::logaddexp(a.lse, b.lse);
  const at::Tensor out = a.out * at::exp(a.lse - lse).unsqueeze(-1) + b.out * at::exp(b.lse - lse).unsqueeze(-1);
  EXPECT_EQ(close_or_worst(out, want.out, kAtol, kRtol), "");
  const BlockGradients ga = block_attention_backward(dout, q, k.narrow(2, 0, 5), v.narrow(2, 0, 5), out, lse, false);
  const BlockGradients gb = block_attention_backward(dout, q, k.narrow(2, 5, 7), v.narrow(2, 5, 7), out, lse, false);
  EXPECT_EQ(close_or_worst(ga.dq + gb.dq, want.dq, kAtol, kRtol), "");
  EXPECT_EQ(close_or_worst(at::cat({ga.dk, gb.dk}, 2), want.dk, kAtol, kRtol), "");
  EXPECT_EQ(close_or_worst(at::cat({ga.dv, gb.dv}, 2), want.dv, kAtol, kRtol), "");
}

TEST(BlockAttention, ADeviceWithoutAKernelIsRefusedNamingIt) {
  const at::Tensor meta = at::empty({1, 2, 3, 4}, at::TensorOptions().device(at::kMeta));
  EXPECT_EQ(error_of([&] { block_attention_forward(meta, meta, meta, true); }),
            "block attention has no fused kernel for device meta (it runs on cpu and cuda)");
  EXPECT_EQ(error_of([&] { block_attention_backward(meta, meta, meta, meta, meta, meta.select(3, 0), true); }),
            "block attention has no fused kernel for device meta (it runs on cpu and cuda)");
  const at::Tensor q = draw({1, 3, 2, 4}, 9), kv = draw({1, 2, 2, 4}, 9);
  EXPECT_EQ(error_of([&] { block_attention_forward(q, kv, kv, false); }),
            "block attention: k and v have 2 and 2 heads, which must be equal and divide q's 3");
}

}  // namespace
}  // namespace dtrain::test::attention_block_test

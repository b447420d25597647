// Ring and Ulysses attention on 2 and 4 real ranks under `dtrain launch`, against the whole
// attention computed on each rank (worker_context_attention.cpp): outputs and q/k/v gradients of each
// rank's tokens, causal and full, zigzag and contiguous chunks of odd lengths, grouped-query and
// multi-head, fp32 and bf16; a group of one; Ulysses' refusal of heads that do not divide by cp.
#include <gtest/gtest.h>

#include <string>

#include "support/process.h"

namespace dtrain::test::context_attention_test {
namespace {

class ContextAttention : public ::testing::TestWithParam<int> {};

TEST_P(ContextAttention, OutputAndGradientsEqualWholeAttention) {
  const int cp = GetParam();
  const ProcessResult r = run_process({DTRAIN_BIN, "launch", "--nproc-per-node", std::to_string(cp), "--grace-period", "1", "--",
                                       std::string(DTRAIN_TEST_BIN_DIR) + "/worker_context_attention"},
                                      120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < cp; ++rank)
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] PASS context_attention")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ContextAttention, ::testing::Values(2, 4),
                         [](const auto& info) { return "cp" + std::to_string(info.param); });

}  // namespace
}  // namespace dtrain::test::context_attention_test

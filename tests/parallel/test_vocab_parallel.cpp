// The vocabulary split over tensor-parallel ranks: vocab_range's torch.chunk rows and its refusal of
// a split that leaves a rank none, in-process; the vocab-parallel cross-entropy and embedding on 2
// and 3 real ranks under `dtrain launch`, against the full computation (worker_vocab_parallel.cpp),
// with vocabularies that do not divide by the ranks.
#include <gtest/gtest.h>

#include <stdexcept>

#include "parallel/tensor/vocab_range.h"
#include "support/process.h"
#include "support/error_of.h"

namespace dtrain::test {
namespace {

using Range = std::pair<int64_t, int64_t>;

using dtrain::test::error_of;

std::vector<Range> ranges(int64_t vocab, int tp) {
  std::vector<Range> out;
  for (int r = 0; r < tp; ++r) out.push_back(vocab_range(vocab, tp, r));
  return out;
}

TEST(VocabRange, SplitsAsTorchChunkWithoutPadding) {
  EXPECT_EQ(ranges(8, 2), (std::vector<Range>{{0, 4}, {4, 8}}));
  EXPECT_EQ(ranges(7, 2), (std::vector<Range>{{0, 4}, {4, 7}}));
  EXPECT_EQ(ranges(10, 3), (std::vector<Range>{{0, 4}, {4, 8}, {8, 10}}));
  EXPECT_EQ(ranges(10, 4), (std::vector<Range>{{0, 3}, {3, 6}, {6, 9}, {9, 10}}));
  EXPECT_EQ(ranges(50257, 2), (std::vector<Range>{{0, 25129}, {25129, 50257}}));
  EXPECT_EQ(ranges(5, 1), (std::vector<Range>{{0, 5}}));
}

TEST(VocabRange, ASplitThatLeavesARankNoRowIsRefusedNamingIt) {
  // 5 over 4 in chunks of 2 is 2, 2, 1 and nothing; 3 over 4 has rows for three ranks only.
  EXPECT_TRUE(contains(error_of([] { vocab_range(5, 4, 0); }),
                       "a vocabulary of 5 rows split over tp 4 in chunks of 2 (as torch.chunk splits it) leaves tp rank 3 without a row"));
  EXPECT_TRUE(contains(error_of([] { vocab_range(3, 4, 1); }), "leaves tp rank 3 without a row"));
  EXPECT_TRUE(contains(error_of([] { vocab_range(0, 1, 0); }), "a vocabulary of 0 rows"));
  EXPECT_TRUE(contains(error_of([] { vocab_range(10, 0, 0); }), "tp is 0, must be at least 1"));
  EXPECT_TRUE(contains(error_of([] { vocab_range(10, 2, 2); }), "tp rank 2 is outside [0, 2)"));
}

// The worker checks, on every rank: the cross-entropy's value and local-logit gradient against
// next_token_loss of the full logits (fp32 and bf16), the same loss on every rank, two collectives
// forward and none backward; the embedding's output and local-row gradient against at::embedding,
// one all-reduce forward and none backward; and over a group of one, both bit for bit.
class VocabParallel : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(VocabParallel, LossEmbeddingAndGradientsEqualTheFullComputation) {
  const auto [tp, vocab] = GetParam();
  const ProcessResult r = run_process({DTRAIN_BIN, "launch", "--nproc-per-node", std::to_string(tp), "--grace-period", "1", "--",
                                       std::string(DTRAIN_TEST_BIN_DIR) + "/worker_vocab_parallel", std::to_string(vocab)},
                                      120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < tp; ++rank)
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] PASS vocab_parallel")) << r.output;
}

// {tp, vocab}: 7 over 2 is 4 + 3 columns, 10 over 3 is 4 + 4 + 2.
INSTANTIATE_TEST_SUITE_P(UnevenVocab, VocabParallel, ::testing::Values(std::pair{2, 7}, std::pair{3, 10}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.first) + "_vocab" + std::to_string(info.param.second);
                         });

}  // namespace
}  // namespace dtrain::test

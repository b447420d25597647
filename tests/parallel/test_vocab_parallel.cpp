// The vocabulary split over tensor-parallel ranks: vocab_range's torch.chunk rows and its refusal of
// a split that leaves a rank none.
#include <gtest/gtest.h>

#include <stdexcept>

#include "parallel/tensor/vocab_range.h"
#include "support/process.h"

namespace dtrain::test {
namespace {

using Range = std::pair<int64_t, int64_t>;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

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

}  // namespace
}  // namespace dtrain::test

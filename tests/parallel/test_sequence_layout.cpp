// How a sequence is dealt over the cp ranks, without communication: the zigzag and contiguous
// chunks, global positions, take(), the named errors, and the causal work each rank's ring pass
// computes — even under zigzag (the reason for it), uneven under the contiguous layout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/context/ring_attention.h"
#include "parallel/context/sequence_layout.h"
#include "support/error_of.h"

namespace dtrain::test::sequence_layout_test {
namespace {

std::vector<int64_t> positions_of(const SequenceLayout& layout) {
  const at::Tensor p = layout.positions(at::kCPU);
  EXPECT_EQ(p.scalar_type(), at::kLong);
  return std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
}

bool mentions(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(SequenceLayout, ZigzagRankHoldsChunkRAndItsMirror) {
  const SequenceLayout l = SequenceLayout::make(24, 3, 1, true);
  EXPECT_EQ(l.chunks(), 6);
  EXPECT_EQ(l.chunk_len(), 4);
  EXPECT_EQ(l.local_len(), 8);
  EXPECT_EQ(l.chunks_of(0), (std::vector<int>{0, 5}));
  EXPECT_EQ(l.chunks_of(1), (std::vector<int>{1, 4}));
  EXPECT_EQ(l.chunks_of(2), (std::vector<int>{2, 3}));
  EXPECT_EQ(positions_of(l), (std::vector<int64_t>{4, 5, 6, 7, 16, 17, 18, 19}));
}

TEST(SequenceLayout, ContiguousRankHoldsOneRun) {
  const SequenceLayout l = SequenceLayout::make(15, 3, 2, false);
  EXPECT_EQ(l.chunks(), 3);
  EXPECT_EQ(l.chunk_len(), 5);
  EXPECT_EQ(l.chunks_of(2), (std::vector<int>{2}));
  EXPECT_EQ(positions_of(l), (std::vector<int64_t>{10, 11, 12, 13, 14}));
}

TEST(SequenceLayout, OneRankHoldsTheWholeSequenceInOrder) {
  for (bool zigzag : {true, false}) {
    const SequenceLayout l = SequenceLayout::make(6, 1, 0, zigzag);
    EXPECT_EQ(positions_of(l), (std::vector<int64_t>{0, 1, 2, 3, 4, 5})) << "zigzag " << zigzag;
  }
}

// Every rank's tokens together are the whole sequence, each token once.
TEST(SequenceLayout, RanksCoverTheSequenceOnce) {
  for (int cp = 1; cp <= 5; ++cp)
    for (bool zigzag : {true, false}) {
      std::vector<int> seen(size_t(2 * cp * 3), 0);
      for (int r = 0; r < cp; ++r)
        for (int64_t p : positions_of(SequenceLayout::make(2 * cp * 3, cp, r, zigzag))) ++seen[size_t(p)];
      EXPECT_EQ(seen, std::vector<int>(seen.size(), 1)) << "cp " << cp << " zigzag " << zigzag;
    }
}

TEST(SequenceLayout, TakeGathersTheRanksTokensAlongADim) {
  const at::Tensor whole = at::arange(2 * 12 * 3).view({2, 12, 3});
  const SequenceLayout l = SequenceLayout::make(12, 2, 1, true);  // chunks 1 and 2 of 3 tokens
  const at::Tensor got = l.take(whole, 1);
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_TRUE(at::equal(got, whole.slice(1, 3, 9)));
  const at::Tensor heads_first = whole.transpose(1, 2);  // [2, 3, 12]: tokens on dim 2, not contiguous
  EXPECT_TRUE(at::equal(l.take(heads_first, 2), heads_first.index_select(2, l.positions(at::kCPU))));
  EXPECT_TRUE(mentions(error_of([&] { l.take(whole, 2); }), "dim 2 has 3 tokens, the layout's model.seq_len is 12"));
}

TEST(SequenceLayout, ASequenceThatDoesNotSplitIsRefusedNamingTheKeys) {
  EXPECT_TRUE(mentions(error_of([] { SequenceLayout::make(10, 3, 0, true); }),
                       "model.seq_len 10 does not split into 6 equal chunks (2 * parallel.cp, the zigzag layout's with parallel.cp 3)"));
  EXPECT_TRUE(mentions(error_of([] { SequenceLayout::make(10, 4, 0, false); }),
                       "model.seq_len 10 does not split into 4 equal chunks (parallel.cp with parallel.cp 4)"));
  EXPECT_EQ(error_of([] { SequenceLayout::make(10, 5, 4, false); }), "no error");
  EXPECT_TRUE(mentions(error_of([] { SequenceLayout::make(10, 0, 0, false); }), "parallel.cp is 0, must be at least 1"));
  EXPECT_TRUE(mentions(error_of([] { SequenceLayout::make(10, 2, 2, false); }), "cp rank 2 is outside [0, 2)"));
}

// The zigzag closed form: rank r's queries in chunk r see r earlier chunks and its own diagonal, those
// in chunk 2cp-1-r see 2cp-1-r and theirs: (r + 1/2) + (2cp-1-r + 1/2) = 2cp, the same on every rank.
TEST(CausalScoreBlocks, ZigzagGivesEveryRankTwiceCp) {
  for (int cp = 1; cp <= 8; ++cp)
    for (int r = 0; r < cp; ++r)
      EXPECT_EQ(causal_score_blocks(SequenceLayout::make(2 * cp * 3, cp, r, true), r), 2.0 * cp) << "cp " << cp << " rank " << r;
}

// Contiguous chunks: rank r sees r earlier chunks and half its own, so the last rank works 2cp-1 times
// as long as the first and the ring runs at its pace.
TEST(CausalScoreBlocks, ContiguousLayoutIsUneven) {
  for (int cp = 1; cp <= 8; ++cp)
    for (int r = 0; r < cp; ++r)
      EXPECT_EQ(causal_score_blocks(SequenceLayout::make(cp * 3, cp, r, false), r), r + 0.5) << "cp " << cp << " rank " << r;
  const SequenceLayout four = SequenceLayout::make(12, 4, 0, false);
  EXPECT_EQ(causal_score_blocks(four, 3) / causal_score_blocks(four, 0), 7.0);
}

}  // namespace
}  // namespace dtrain::test::sequence_layout_test

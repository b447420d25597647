// How a model's blocks are cut into pipeline chunks: the analytic costs weigh the head by its
// vocabulary, balance_split finds the least largest chunk (checked against every split of small
// cases), explicit splits are checked by name, and the timed probe returns usable costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include "parallel/pipeline/stage_split.h"
#include "support/error_of.h"

using namespace dtrain;
using dtrain::test::error_of;

namespace {

// Every way of cutting n blocks into `chunks` runs of at least one, calling `visit` with each.
void each_split(int n, int chunks, std::vector<int>& prefix, const std::function<void(const std::vector<int>&)>& visit) {
  if (int(prefix.size()) == chunks - 1) {
    prefix.push_back(n);
    visit(prefix);
    prefix.pop_back();
    return;
  }
  for (int blocks = 1; blocks <= n - (chunks - 1 - int(prefix.size())); ++blocks) {
    prefix.push_back(blocks);
    each_split(n - blocks, chunks, prefix, visit);
    prefix.pop_back();
  }
}

double largest(const std::vector<double>& costs) { return *std::max_element(costs.begin(), costs.end()); }

double sum_of_squares(const std::vector<double>& costs) {
  return std::accumulate(costs.begin(), costs.end(), 0.0, [](double sum, double x) { return sum + x * x; });
}

TransformerConfig gpt2_124m() { return model_preset("gpt2-124m"); }

}  // namespace

TEST(StageSplit, ALargeVocabularyMakesTheHeadWorthSeveralBlocksAndMovesBlocksOffTheLastChunk) {
  const LayerCosts gpt2 = model_layer_costs(gpt2_124m(), 1);
  // 6 · 768 · 50257 FLOPs a token for the head against about 52M for a block (12·d² weights, T = 1024).
  EXPECT_GT(gpt2.head, 4 * gpt2.block);
  EXPECT_LT(gpt2.embedding, gpt2.block / 100);
  EXPECT_EQ(balance_split(gpt2, 12, 4), (std::vector<int>{3, 4, 4, 1}));
  // The same model with a 256-token vocabulary: the head is a fraction of a block, and the split even.
  TransformerConfig small_vocab = gpt2_124m();
  small_vocab.vocab_size = 256;
  const LayerCosts even = model_layer_costs(small_vocab, 1);
  EXPECT_LT(even.head, even.block / 10);
  EXPECT_EQ(balance_split(even, 12, 4), (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(describe_split({3, 4, 4, 1}, gpt2, "cost model"),
            "pipeline split (cost model): chunks of 3, 4, 4, 1 blocks; costs 0.18, 0.24, 0.24, 0.33 of the total");
}

TEST(StageSplit, CostsScaleWithTheMicroBatchAndFollowLlamasShape) {
  const TransformerConfig llama = model_preset("llama-1b");
  const LayerCosts one = model_layer_costs(llama, 1), four = model_layer_costs(llama, 4);
  EXPECT_DOUBLE_EQ(four.block, 4 * one.block);
  EXPECT_DOUBLE_EQ(four.head, 4 * one.head);
  // Per token, forward and backward: 3 · 2 · (q, o: d² each; k, v: d·512 each; SwiGLU: 3·d·8192)
  // plus attention's 3 · 4 · T · d.
  const double d = 2048, T = 2048;
  EXPECT_DOUBLE_EQ(one.block, T * (6 * (2 * d * d + 2 * d * 512 + 3 * d * 8192) + 12 * T * d));
  // Grouped-query attention's fewer key/value heads cost less than multi-head attention's.
  TransformerConfig multi_head = llama;
  multi_head.n_kv_head = 0;
  EXPECT_GT(model_layer_costs(multi_head, 1).block, one.block);
}

TEST(StageSplit, BalanceSplitMatchesTheBestOfEverySplitOnSmallCases) {
  const std::vector<LayerCosts> cases = {{0.1, 1, 0.3}, {0, 1, 4.5}, {2.5, 1, 0}, {0.01, 1, 1}, {3, 1, 7}, {0, 1, 0}};
  for (const LayerCosts& costs : cases)
    for (int n = 1; n <= 9; ++n)
      for (int chunks = 1; chunks <= n; ++chunks) {
        double best_largest = std::numeric_limits<double>::infinity(), best_squares = best_largest;
        std::vector<int> prefix;
        each_split(n, chunks, prefix, [&](const std::vector<int>& split) {
          const std::vector<double> each = chunk_costs(costs, split);
          if (largest(each) < best_largest) {
            best_largest = largest(each);
            best_squares = sum_of_squares(each);
          } else if (largest(each) == best_largest) {
            best_squares = std::min(best_squares, sum_of_squares(each));
          }
        });
        const std::vector<int> split = balance_split(costs, n, chunks);
        const std::string where = "n " + std::to_string(n) + ", chunks " + std::to_string(chunks) + ", head " + std::to_string(costs.head);
        ASSERT_EQ(int(split.size()), chunks) << where;
        EXPECT_EQ(std::accumulate(split.begin(), split.end(), 0), n) << where;
        EXPECT_GE(*std::min_element(split.begin(), split.end()), 1) << where;
        EXPECT_EQ(largest(chunk_costs(costs, split)), best_largest) << where;
        EXPECT_NEAR(sum_of_squares(chunk_costs(costs, split)), best_squares, 1e-9 * best_squares) << where;
      }
}

TEST(StageSplit, MoreChunksThanBlocksAreRefused) {
  EXPECT_EQ(error_of([] { balance_split({0, 1, 1}, 3, 4); }), "cannot cut 3 blocks into 4 chunks of at least one block each");
  EXPECT_EQ(error_of([] { balance_split({0, 1, 1}, 3, 0); }), "cannot cut 3 blocks into 0 chunks of at least one block each");
}

TEST(StageSplit, AnExplicitSplitIsCheckedByName) {
  EXPECT_EQ(error_of([] { check_split({3, 4, 5}, 2, 2, 12); }),
            "'parallel.pipeline.split' [3, 4, 5] gives 3 chunk(s), but parallel.pp 2 x parallel.pipeline.virtual_stages 2 makes 4: "
            "give one block count per chunk");
  EXPECT_EQ(error_of([] { check_split({3, 0, 5, 4}, 4, 1, 12); }),
            "'parallel.pipeline.split' [3, 0, 5, 4] gives chunk 1 0 blocks; every chunk holds at least one block");
  EXPECT_EQ(error_of([] { check_split({3, 4}, 2, 1, 8); }),
            "'parallel.pipeline.split' [3, 4] places 7 blocks, but model.n_layer is 8: a split places every block of the model exactly once");
  EXPECT_EQ(error_of([] { check_split({1, 3, 3, 1}, 2, 2, 8); }), "no error");
}

TEST(StageSplit, TheProbeMeasuresEachPartOnTheDevice) {
  for (const std::string arch : {"gpt2", "llama"}) {
    TransformerConfig c = model_preset("tiny");
    c.arch = arch;
    c.vocab_size = 4096;  // a head worth measuring apart from the noise
    const LayerCosts measured = measure_layer_costs(c, 2, MixedPrecision{}, at::Device(at::kCPU), 7);
    for (double seconds : {measured.embedding, measured.block, measured.head}) {
      EXPECT_GT(seconds, 0) << arch;
      EXPECT_TRUE(std::isfinite(seconds)) << arch;
      EXPECT_LT(seconds, 1) << arch << ": a pass of the tiny model's part took " << seconds << " s";
    }
    const std::vector<int> split = balance_split(measured, 8, 4);
    EXPECT_EQ(std::accumulate(split.begin(), split.end(), 0), 8) << arch;
  }
}

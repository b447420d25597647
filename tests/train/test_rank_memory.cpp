// The least memory a training rank needs, as the launcher checks it against the host.
#include <gtest/gtest.h>

#include "train/rank_memory.h"
#include "train/train_config.h"

namespace dtrain {
namespace {

TrainConfig tiny(const std::vector<std::string>& sets, int world_size) {
  std::vector<std::string> all{"model.preset=tiny"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_train_config("", all, world_size);
}

double state_bytes_per_parameter(const TrainConfig& c) {
  return (rank_memory_floor(c, false).bytes - kRankProcessBytes) / double(c.model.parameter_count());
}

TEST(RankMemory, Fp32AdamWHoldsWeightsGradientsAndTwoMoments) {
  const TrainConfig c = tiny({}, 1);
  const RankMemory m = rank_memory_floor(c, false);
  EXPECT_DOUBLE_EQ(m.bytes, kRankProcessBytes + 16.0 * c.model.parameter_count());
  EXPECT_EQ(m.how, std::to_string(c.model.parameter_count()) +
                       " parameters × 16 bytes for weights, gradients and optimizer state, and 64 MiB for the process");
}

TEST(RankMemory, ZeroStagesShardWhatTheyShard) {
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(tiny({"zero_optimization.stage=1"}, 4)), 4 + 4 + 8 / 4.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(tiny({"zero_optimization.stage=2"}, 4)), 4 + 4 / 4.0 + 8 / 4.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(tiny({"zero_optimization.stage=3"}, 4)), (4 + 4 + 8) / 4.0);
}

// The estimate asks the optimizer for its state: SGD keeps its momentum buffer with or without momentum.
TEST(RankMemory, TheOptimizerStateIsWhatTheOptimizerKeeps) {
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(tiny({R"(optimizer={"type": "SGD", "params": {"lr": 0.1}})"}, 1)), 12);
  EXPECT_DOUBLE_EQ(
      state_bytes_per_parameter(tiny({R"(optimizer={"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}})"}, 1)), 12);
}

TEST(RankMemory, OnGpusOnlyTheProcessCountsForTheHost) {
  EXPECT_DOUBLE_EQ(rank_memory_floor(tiny({}, 1), true).bytes, kRankProcessBytes);
}

}  // namespace
}  // namespace dtrain

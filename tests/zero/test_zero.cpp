// ZeRO stage 1: the flat shards, and training that must match plain data parallelism bit for bit.
#include <gtest/gtest.h>

#include "parallel/zero/flat_shard.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/training_run.h"

namespace dtrain::test {
namespace {

TEST(FlatShard, RanksCoverTheBufferOnceWithEqualPaddedShares) {
  for (int64_t numel : {0, 1, 7, 8, 9, 100, 1001})
    for (int ranks = 1; ranks <= 4; ++ranks) {
      int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const FlatShard s(numel, ranks, r);
        EXPECT_EQ(s.shard_len * ranks, s.padded());
        EXPECT_GE(s.padded(), numel);
        EXPECT_LT(s.padded() - numel, ranks) << numel << " over " << ranks;
        EXPECT_EQ(s.begin, next) << "rank " << r << " of " << ranks << ", numel " << numel;
        EXPECT_LE(s.local_len, s.shard_len);
        next = s.begin + s.local_len;
      }
      EXPECT_EQ(next, numel) << numel << " over " << ranks;
    }
  EXPECT_THROW(FlatShard(10, 2, 2), std::invalid_argument);
}

// AdamW updates each element from that element alone, so updating shards and gathering them must
// give plain data parallelism's parameters bit for bit. Three ranks pad the buffer; accumulation,
// clipping and a frozen tensor are on.
TEST(ZeroStage1, TrainsBitForBitLikeDataParallel) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const std::vector<std::string> job = {"model.arch=" + arch, "model.n_head=" + std::string(arch == "llama" ? "4" : "2"),
                                          "model.n_kv_head=" + std::string(arch == "llama" ? "2" : "0"),
                                          "train_batch_size=12", "train_micro_batch_size_per_gpu=2",
                                          "gradient_accumulation_steps=2", "train.freeze=[\"blocks.0.ln1.*\"]"};
    const TrainingRun ddp = train(scratch_dir("zero0_" + arch), 3, job);
    ASSERT_EQ(ddp.result.exit_code, 0) << ddp.result.output;
    auto sharded_job = job;
    sharded_job.push_back("zero_optimization.stage=1");
    const TrainingRun zero = train(scratch_dir("zero1_" + arch), 3, sharded_job);
    ASSERT_EQ(zero.result.exit_code, 0) << zero.result.output;
    EXPECT_TRUE(contains(zero.result.output, "ZeRO stage 1: optimizer state sharded over 3 rank(s)")) << zero.result.output;
    ASSERT_EQ(zero.steps.size(), ddp.steps.size());
    for (size_t i = 0; i < ddp.steps.size(); ++i) {
      EXPECT_EQ(zero.steps[i]["loss"].get<double>(), ddp.steps[i]["loss"].get<double>()) << arch << " step " << i + 1;
      EXPECT_EQ(zero.steps[i]["grad_norm"].get<double>(), ddp.steps[i]["grad_norm"].get<double>()) << arch << " step " << i + 1;
    }
    expect_same_parameters(final_parameters(zero, 4), final_parameters(ddp, 4));
  }
}

// The checkpoint holds the whole optimizer state, so a run stopped under stage 1 continues without
// ZeRO (and the other way round) exactly as the uninterrupted run.
TEST(ZeroStage1, CheckpointsResumeAcrossStages) {
  const std::vector<std::string> job = {"train.steps=6", "train.deterministic=true"};
  const TrainingRun straight = train(scratch_dir("zero_straight"), 2, job);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  for (const auto& [first_stage, second_stage] : {std::pair{"1", "0"}, std::pair{"0", "1"}}) {
    const std::string dir = scratch_dir(std::string("zero_resume_") + first_stage + second_stage);
    auto first = job;
    first.insert(first.end(), {"train.stop_at_step=3", std::string("zero_optimization.stage=") + first_stage});
    const TrainingRun half = train(dir, 2, first);
    ASSERT_EQ(half.result.exit_code, 0) << half.result.output;
    auto second = job;
    second.push_back(std::string("zero_optimization.stage=") + second_stage);
    const TrainingRun resumed = train(dir, 2, second);
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    EXPECT_TRUE(contains(resumed.result.output, "resumed from " + dir + "/ckpt/step-00000003 at step 3")) << resumed.result.output;
    ASSERT_EQ(resumed.steps.size(), 6u);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>())
          << "stage " << first_stage << " then " << second_stage << ", step " << i + 1;
    expect_same_parameters(final_parameters(straight, 6), final_parameters(resumed, 6));
  }
}

TEST(ZeroStage1, StagesNotBuiltYetAndOutOfRangeAreRefusedByName) {
  const TrainingRun two = train(scratch_dir("zero_stage2"), 1, {"zero_optimization.stage=2"});
  EXPECT_NE(two.result.exit_code, 0);
  EXPECT_TRUE(contains(two.result.output, "zero_optimization.stage=2")) << two.result.output;
  const TrainingRun seven = train(scratch_dir("zero_stage7"), 1, {"zero_optimization.stage=7"});
  EXPECT_NE(seven.result.exit_code, 0);
  EXPECT_TRUE(contains(seven.result.output, "'zero_optimization.stage' must be")) << seven.result.output;
}

}  // namespace
}  // namespace dtrain::test

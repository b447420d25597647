// Sharded checkpoints across layouts: a run saved on 4 ranks at ZeRO stage 3 continues on 2 ranks at
// stage 1 and on one rank without ZeRO like the uninterrupted run (the global batch, and so the data
// each step sees, does not depend on the number of ranks); a damaged shard makes resume fall back to
// the checkpoint before; generate reads the sharded checkpoint directly.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/process.h"
#include "support/scratch.h"
#include "train/equivalence.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// A global batch of 8 whatever the number of ranks: micro-batches of 2, accumulation to fill it.
std::vector<std::string> job(int ranks, int stage, std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {"train.steps=6", "train_batch_size=8", "train_micro_batch_size_per_gpu=2",
                                   "gradient_accumulation_steps=auto", "zero_optimization.reduce_bucket_size=5000",
                                   "zero_optimization.stage=" + std::to_string(stage), "checkpoint.every_steps=2", "checkpoint.keep=0",
                                   "train.freeze=[\"blocks.0.ln1.*\"]"};
  if (ranks == 4 && stage == 3) sets.push_back("parallel.fsdp.sharding_strategy=full_shard");
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

TEST(Resharding, AStage3CheckpointOnFourRanksResumesOnTwoAtStage1AndOnOneWithoutZero) {
  const TrainingRun straight = train(scratch_dir("reshard_straight"), 4, job(4, 3));
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(fs::exists(ckpt(straight.dir, 6) + "/shard-0000" + std::to_string(r) + ".safetensors")) << "rank " << r << " wrote no shard";

  const std::string stopped = scratch_dir("reshard_stopped");
  const TrainingRun first = train(stopped, 4, job(4, 3, {"train.stop_at_step=3"}));
  ASSERT_EQ(first.result.exit_code, 0) << first.result.output;
  for (const auto& [ranks, stage] : {std::pair{2, 1}, std::pair{1, 0}}) {
    const std::string dir = scratch_dir("reshard_to_" + std::to_string(ranks) + "_" + std::to_string(stage));
    fs::remove_all(dir);
    fs::copy(stopped, dir, fs::copy_options::recursive);
    const TrainingRun resumed = train(dir, ranks, job(ranks, stage));
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    EXPECT_TRUE(contains(resumed.result.output, "resumed from " + ckpt(dir, 3) + " at step 3")) << resumed.result.output;
    SCOPED_TRACE("dp 4 stage 3, then dp " + std::to_string(ranks) + " stage " + std::to_string(stage));
    expect_same_training(resumed, straight, 6);
  }

  const auto generated = run_process({DTRAIN_BIN, "generate", "--checkpoint", straight.dir + "/ckpt", "--tokens", "8"}, 60);
  EXPECT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_TRUE(contains(generated.output, "generate: " + ckpt(straight.dir, 6))) << generated.output;
}

TEST(Resharding, ADamagedShardFallsBackToThePreviousCheckpoint) {
  const std::string dir = scratch_dir("reshard_damaged");
  const TrainingRun first = train(dir, 4, job(4, 3, {"train.steps=4"}));
  ASSERT_EQ(first.result.exit_code, 0) << first.result.output;
  const std::string damaged = ckpt(dir, 4) + "/shard-00002.safetensors";
  fs::resize_file(damaged, fs::file_size(damaged) - 4);
  const TrainingRun again = train(dir, 2, job(2, 1));
  ASSERT_EQ(again.result.exit_code, 0) << again.result.output;
  EXPECT_TRUE(contains(again.result.output, damaged)) << again.result.output;
  EXPECT_TRUE(contains(again.result.output, "resumed from " + ckpt(dir, 2) + " at step 2")) << again.result.output;
}

}  // namespace
}  // namespace dtrain::test

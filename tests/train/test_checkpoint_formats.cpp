// Checkpoints written before index version 2 still resume (version_one_checkpoint.h makes one).
#include <gtest/gtest.h>

#include "ckpt/sharded_checkpoint.h"
#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"
#include "training_run.h"
#include "version_one_checkpoint.h"

namespace dtrain::test {
namespace {

// A global batch of 4 on any number of ranks, ZeRO-1's flat ranges of the state on two.
std::vector<std::string> job(std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {"train.steps=4", "train_batch_size=4", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=auto",
                                   "zero_optimization.stage=1", "checkpoint.every_steps=2", "checkpoint.keep=0"};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

TEST(Resume, AVersionOneCheckpointResumesLikeTheUninterruptedRun) {
  const TrainingRun straight = train(scratch_dir("v1_straight"), 2, job());
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  for (const int ranks : {2, 1}) {
    const std::string dir = scratch_dir("v1_resumed_on_" + std::to_string(ranks));
    ASSERT_EQ(train(dir, 2, job({"train.stop_at_step=2"})).result.exit_code, 0);
    rewrite_as_version_one(ckpt(dir, 2), 2);
    ASSERT_NO_THROW(CheckpointManager::verify(ckpt(dir, 2)));
    ASSERT_EQ(ShardedCheckpointReader(ckpt(dir, 2)).version(), 1);
    const TrainingRun resumed = train(dir, ranks, job({"zero_optimization.stage=0"}));
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    EXPECT_TRUE(contains(resumed.result.output, "resumed from " + ckpt(dir, 2) + " at step 2")) << resumed.result.output;
    SCOPED_TRACE("a version-1 checkpoint of 2 ranks resumed on " + std::to_string(ranks));
    expect_same_training(resumed, straight, 4);
    EXPECT_EQ(ShardedCheckpointReader(ckpt(dir, 4)).version(), 2);  // what the resumed run saves is version 2
  }
}

}  // namespace
}  // namespace dtrain::test

// ZeRO stages 1 and 2: the shard layout, training against plain data parallelism and one rank, and
// checkpoints across stages.
#include <gtest/gtest.h>

#include <algorithm>

#include "parallel/zero/bucket_shards.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/training_run.h"

namespace dtrain::test {
namespace {

TEST(BucketShards, EveryRankOwnsAnEqualPaddedPieceOfEveryBucket) {
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{1}, {7, 8, 9}, {100, 1, 1001, 64}})
    for (int ranks = 1; ranks <= 4; ++ranks) {
      std::vector<GradBucket> buckets;
      int64_t offset = 0;
      for (int64_t n : sizes) {
        buckets.push_back({offset, n, 0, 1});
        offset += n;
      }
      std::vector<int> owner(size_t(offset), -1);
      int64_t owned = 0;
      for (int r = 0; r < ranks; ++r) {
        const BucketShards s(buckets, ranks, r);
        ASSERT_EQ(s.pieces().size(), sizes.size());
        EXPECT_EQ(s.numel(), offset);
        int64_t shard_offset = 0;
        for (size_t b = 0; b < sizes.size(); ++b) {
          const ShardPiece& p = s.pieces()[b];
          EXPECT_EQ(p.padded_numel, p.piece * ranks);
          EXPECT_GE(p.padded_numel, sizes[b]);
          EXPECT_LT(p.padded_numel - sizes[b], ranks) << "bucket " << b << " over " << ranks;
          EXPECT_EQ(p.shard_offset, shard_offset);
          EXPECT_LE(p.local, p.piece);
          shard_offset += p.piece;
          for (int64_t i = p.begin; i < p.begin + p.local; ++i) {
            EXPECT_EQ(owner[size_t(i)], -1) << "element " << i << " owned twice";
            owner[size_t(i)] = r;
          }
        }
        EXPECT_EQ(s.shard_numel(), shard_offset);
        EXPECT_EQ(s.shard_numel(), BucketShards(buckets, ranks, 0).shard_numel()) << "shards of unequal size";
        owned += s.owned_numel();
      }
      EXPECT_EQ(owned, offset);
      EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0) << "elements nobody owns";
    }
  EXPECT_THROW(BucketShards({}, 2, 2), std::invalid_argument);
}

// GPT-2 and Llama with three ranks (every bucket padded), several buckets, accumulation, clipping
// and a frozen tensor.
std::vector<std::string> sharded_job(const std::string& arch) {
  return {"model.arch=" + arch, "model.n_head=" + std::string(arch == "llama" ? "4" : "2"),
          "model.n_kv_head=" + std::string(arch == "llama" ? "2" : "0"), "train_batch_size=12",
          "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=2", "train.freeze=[\"blocks.0.ln1.*\"]",
          "zero_optimization.reduce_bucket_size=5000"};
}

TrainingRun train_at_stage(const std::string& dir, int nproc, std::vector<std::string> job, int stage) {
  job.push_back("zero_optimization.stage=" + std::to_string(stage));
  TrainingRun run = train(dir, nproc, job);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.output;
  return run;
}

// AdamW updates each element from that element alone, so updating shards and gathering them must
// give plain data parallelism's parameters bit for bit.
TEST(ZeroStage1, TrainsBitForBitLikeDataParallel) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const TrainingRun ddp = train_at_stage(scratch_dir("zero0_" + arch), 3, sharded_job(arch), 0);
    const TrainingRun zero = train_at_stage(scratch_dir("zero1_" + arch), 3, sharded_job(arch), 1);
    EXPECT_TRUE(contains(zero.result.output, "ZeRO stage 1: optimizer state sharded over 3 rank(s)")) << zero.result.output;
    EXPECT_FALSE(contains(zero.result.output, " 1 gradient bucket(s)")) << zero.result.output;
    ASSERT_EQ(zero.steps.size(), ddp.steps.size());
    for (size_t i = 0; i < ddp.steps.size(); ++i) {
      EXPECT_EQ(zero.steps[i]["loss"].get<double>(), ddp.steps[i]["loss"].get<double>()) << arch << " step " << i + 1;
      EXPECT_EQ(zero.steps[i]["grad_norm"].get<double>(), ddp.steps[i]["grad_norm"].get<double>()) << arch << " step " << i + 1;
    }
    expect_same_parameters(final_parameters(zero, 4), final_parameters(ddp, 4));
  }
}

// Stage 2 reduces every micro-batch into shards and sums the norm over them: other summation
// orders, so the suite's fp32 tolerance against one rank with the whole batch.
TEST(ZeroStage2, TrainsLikeOneRank) {
  for (const std::string arch : {"gpt2", "llama"}) {
    auto whole_batch = sharded_job(arch);
    whole_batch.insert(whole_batch.end(), {"train_micro_batch_size_per_gpu=12", "gradient_accumulation_steps=1"});
    const TrainingRun one = train_at_stage(scratch_dir("zero2_one_" + arch), 1, whole_batch, 0);
    const TrainingRun zero = train_at_stage(scratch_dir("zero2_" + arch), 3, sharded_job(arch), 2);
    EXPECT_TRUE(contains(zero.result.output, "ZeRO stage 2: optimizer state and gradients sharded over 3 rank(s)"))
        << zero.result.output;
    expect_same_training(zero, one, 4);
  }
}

// The checkpoint holds the whole optimizer state, so a run stopped under one stage continues under
// another: exactly as the uninterrupted run where both sides do the same arithmetic (stages 0 and 1;
// stage 2 with itself), within the fp32 tolerance from stage 2 to stage 0.
TEST(Zero, CheckpointsResumeAcrossStages) {
  const std::vector<std::string> job = {"train.steps=6", "train.deterministic=true", "zero_optimization.reduce_bucket_size=5000"};
  const TrainingRun straight = train_at_stage(scratch_dir("zero_straight"), 2, job, 0);
  const TrainingRun straight2 = train_at_stage(scratch_dir("zero_straight2"), 2, job, 2);
  for (const auto& [first_stage, second_stage] : {std::pair{1, 0}, std::pair{0, 1}, std::pair{2, 2}, std::pair{2, 0}}) {
    const std::string dir = scratch_dir("zero_resume_" + std::to_string(first_stage) + std::to_string(second_stage));
    auto first = job;
    first.push_back("train.stop_at_step=3");
    train_at_stage(dir, 2, first, first_stage);
    const TrainingRun resumed = train_at_stage(dir, 2, job, second_stage);
    EXPECT_TRUE(contains(resumed.result.output, "resumed from " + resumed.dir + "/ckpt/step-00000003 at step 3")) << resumed.result.output;
    const TrainingRun& expected = second_stage == 2 ? straight2 : straight;
    if (first_stage == 2 && second_stage == 0) {
      expect_same_training(resumed, expected, 6);
      continue;
    }
    ASSERT_EQ(resumed.steps.size(), 6u);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), expected.steps[i]["loss"].get<double>())
          << "stage " << first_stage << " then " << second_stage << ", step " << i + 1;
    expect_same_parameters(final_parameters(expected, 6), final_parameters(resumed, 6));
  }
}

TEST(Zero, StagesNotBuiltYetAndOutOfRangeAreRefusedByName) {
  const TrainingRun three = train(scratch_dir("zero_stage3"), 1, {"zero_optimization.stage=3"});
  EXPECT_NE(three.result.exit_code, 0);
  EXPECT_TRUE(contains(three.result.output, "zero_optimization.stage=3")) << three.result.output;
  const TrainingRun seven = train(scratch_dir("zero_stage7"), 1, {"zero_optimization.stage=7"});
  EXPECT_NE(seven.result.exit_code, 0);
  EXPECT_TRUE(contains(seven.result.output, "'zero_optimization.stage' must be")) << seven.result.output;
}

}  // namespace
}  // namespace dtrain::test

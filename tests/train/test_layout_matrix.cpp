// Any layout to any layout: one job trained in legs, each leg under another of the layouts that have
// landed — data parallelism at each ZeRO stage (the optimizer state offloaded to host memory
// too), tensor parallelism with sequence parallelism, pipeline schedules with virtual stages, ring
// and Ulysses context parallelism, fp32 and bf16 with fp32 masters — each resuming the previous
// leg's checkpoint, model, optimizer moments, step, schedule and data position. Every layout is the
// source of one change and the target of another; the legs train like the same job on one rank
// within the fp32 bounds of another summation order (equivalence.h), with the global batch kept by
// changing the accumulation (each leg says its batch arithmetic). The tests per parallelism
// (test_tensor_parallel_resume, test_pipeline_resume, test_context_parallel_resume) look closer
// at what each one's checkpoint says of itself.
#include <gtest/gtest.h>

#include "layout_legs.h"

namespace dtrain::test {
namespace {

const Sets kBf16 = {"bf16.enabled=true"};
const Sets kFourHeads = {"model.n_head=4"};

}  // namespace

// fp32 through every parallelism: interleaved pp 2 -> ring cp 2 with ZeRO-3 -> tp 2 with sequence
// parallelism and ZeRO-2 offloaded over dp 2 (4 ranks) -> one rank -> 1f1b pp 2 with ZeRO-1 over dp 2
// (4 ranks) -> Ulysses cp 2 with tp 2 (4 ranks).
TEST(LayoutMatrix, Fp32LegsThroughEveryParallelismTrainLikeOneRank) {
  expect_legs_train_like_one_rank(
      "layout_matrix_fp32", kLayoutJob + kGpt2FourBlocks + kFourHeads,
      {{2, kTwoStagesInterleaved, 1, "pp 2 x 2 virtual stage(s), 4 chunks of 1, 1, 1, 1 blocks, schedule interleaved_1f1b"},
       {2, {"parallel.cp=2", "zero_optimization.stage=3"}, 2, "ZeRO stage 3: parameters, gradients and optimizer state sharded over 2"},
       {4,
        {"parallel.tp=2", "parallel.sequence_parallel=true", "zero_optimization.stage=2",
         "zero_optimization.offload_optimizer.device=cpu"},
        3, "batch: 8 = micro 2 x accumulation 2 x dp 2"},
       {1, {}, 4, kSaysOneRank},
       {4, {"parallel.pp=2", "zero_optimization.stage=1"}, 5, "batch: 8 = micro 2 x accumulation 2 x dp 2"},
       {4, {"parallel.tp=2", "parallel.cp=2", "parallel.context.impl=\"ulysses\""}, 6, "context parallel: cp 2, Ulysses"}});
}

// bf16 with fp32 masters, then fp32, against one rank doing the same: the 16-bit legs change how
// the same micro-batches' gradients are summed (pipeline stages, ZeRO-3's shards), and a weight that
// differs in its last fp32 bits can round to another bf16 working copy, so the bounds are
// equivalence.h's bf16 ones; a checkpoint that lost the moments or the data position moves the
// losses by far more.
TEST(LayoutMatrix, Bf16LegsContinueInFp32LikeOneRankDoingTheSame) {
  const Sets job = kLayoutJob + kLlamaFourBlocks;
  const TrainingRun one_rank = train_in_legs("layout_matrix_precision_straight", job,
                                             {{1, kBf16, 4, "precision bf16"}, {1, {}, 6, kSaysOneRank}});
  const TrainingRun legs = train_in_legs(
      "layout_matrix_precision", job,
      {{2, kTwoStagesInterleaved + kBf16, 2, "schedule interleaved_1f1b"},
       {2, kBf16 + Sets{"zero_optimization.stage=3", "zero_optimization.offload_optimizer.device=cpu"}, 4,
        "batch: 8 = micro 2 x accumulation 2 x dp 2"},
       {4, {"parallel.tp=2", "zero_optimization.stage=1"}, 6, "tensor parallel: tp 2"}});
  ASSERT_EQ(legs.steps.size(), 6u) << legs.result.output;
  expect_equivalent(legs, one_rank, kBf16Reordered, legs.dir + " against " + one_rank.dir);
}

}  // namespace dtrain::test

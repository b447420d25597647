// ZeRO stage 3 under a pipeline: each stage's units are gathered once per step, however many
// micro-batches the schedule runs through them, and freed once their gradients are taken
// (docs/decisions.md: stage 3 under a pipeline). The unit trace of wall_clock_breakdown (rank 0, the
// first stage) lists every gather and free of a step.
#include <gtest/gtest.h>

#include <map>

#include "support/scratch.h"
#include "training_run.h"

namespace dtrain::test {
namespace {

TEST(PipelineSharding, StageThreeGathersEachUnitOncePerStepThroughEveryMicroBatch) {
  // pp 2 x dp 2, 4 micro-batches of 1 per step under 1f1b: blocks 0 and 1 with the embedding on stage 0.
  const TrainingRun run = train(scratch_dir("pp_zero3_gathers"), 4,
                                {"model.n_layer=4", "parallel.pp=2", "zero_optimization.stage=3", "train_batch_size=8",
                                 "train_micro_batch_size_per_gpu=1", "wall_clock_breakdown=true", "train.steps=2"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  ASSERT_EQ(run.steps.size(), 2u);
  for (const auto& step : run.steps) {
    std::map<int, int> gathers, frees;
    for (const auto& e : step["unit_trace"]) {
      if (e[0] == "gather") ++gathers[e[1].get<int>()];
      if (e[0] == "free") ++frees[e[1].get<int>()];
    }
    // Parts 0 (the embedding) and 1, 2 (blocks 0 and 1): one gather and one free each.
    const std::map<int, int> once = {{0, 1}, {1, 1}, {2, 1}};
    EXPECT_EQ(gathers, once) << "step " << step["step"] << ": " << step["unit_trace"].dump();
    EXPECT_EQ(frees, once) << "step " << step["step"] << ": " << step["unit_trace"].dump();
  }
}

}  // namespace
}  // namespace dtrain::test

// A pipeline stage killed with SIGKILL mid-step (ckpt/crash_points.h's "pipeline" point: after the
// stage's first action of the step, its neighbour waiting on it): the neighbour's receive fails at
// once, naming the dead rank, rather than waiting out the timeout; under the launcher the group
// stops, restarts, resumes from the last checkpoint and ends exactly like the uninterrupted run.
#include <gtest/gtest.h>

#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"

namespace dtrain::test {
namespace {

// pp 2 over 4 blocks, 4 micro-batches per step, a checkpoint every step; deterministic kernels, so
// a resumed run repeats the uninterrupted one bit for bit. Far more wait than the tests allow, so
// that a rank that noticed its neighbour's death only by timing out would fail them.
const Sets kKilledStageJob = {"model.arch=gpt2", "model.n_layer=4", "parallel.pp=2", "train_batch_size=8", "train_micro_batch_size_per_gpu=2",
                   "train.steps=5", "train.deterministic=true", "checkpoint.every_steps=1", "dist.timeout_s=600"};
constexpr int kKilledStageSteps = 5, kKilledAt = 3;

std::string killed_mid_step(int stage) { return "DTRAIN_CRASH_AT=pipeline:" + std::to_string(kKilledAt) + ":0:" + std::to_string(stage); }

class KilledStage : public ::testing::TestWithParam<int> {};

// The launcher stops the survivor, restarts both and the run resumes from the step before the kill
// (the killed step left no checkpoint), ending with the uninterrupted run's losses and parameters.
TEST_P(KilledStage, TheGroupRestartsAndEndsExactlyLikeTheUninterruptedRun) {
  const int stage = GetParam();
  const std::string dir = scratch_dir("pp_killed_stage" + std::to_string(stage));
  const TrainingRun crashed = train(dir, 2, kKilledStageJob, {"--max-restarts", "1"}, {killed_mid_step(stage)});
  ASSERT_EQ(crashed.result.exit_code, 0) << crashed.result.output;
  EXPECT_TRUE(contains(crashed.result.output, "rank " + std::to_string(stage) + " failed: signal 9 (SIGKILL)")) << crashed.result.output;
  EXPECT_TRUE(contains(crashed.result.output, "restarting the job (restart 1 of 1)")) << crashed.result.output;
  EXPECT_TRUE(contains(crashed.result.output, "resumed from " + ckpt(dir, kKilledAt - 1) + " at step " + std::to_string(kKilledAt - 1)))
      << crashed.result.output;
  const TrainingRun straight = train(scratch_dir("pp_not_killed_stage" + std::to_string(stage)), 2, kKilledStageJob);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  ASSERT_EQ(crashed.steps.size(), size_t(kKilledStageSteps));
  ASSERT_EQ(straight.steps.size(), size_t(kKilledStageSteps));
  for (int i = 0; i < kKilledStageSteps; ++i) {
    EXPECT_EQ(crashed.steps[i]["step"].get<int>(), i + 1);
    EXPECT_EQ(crashed.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(crashed.steps[i]["grad_norm"].get<double>(), straight.steps[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
  expect_same_parameters(final_parameters(crashed, kKilledStageSteps), final_parameters(straight, kKilledStageSteps));
}

// Without a launcher to stop it, the survivor's own receive fails, naming the group and the rank it
// waited on, on either transport, long before dist.timeout_s.
TEST_P(KilledStage, TheNeighboursReceiveFailsNamingTheDeadRank) {
  const int stage = GetParam(), neighbour = 1 - stage;
  for (const std::string backend : {"shm", "gloo"}) {
    const auto ranks = train_ranks_alone(scratch_dir("pp_killed_alone_" + backend), 2, kKilledStageJob + Sets{"dist.backend=" + backend},
                                         {killed_mid_step(stage)});
    EXPECT_EQ(ranks[size_t(stage)].signal, 9) << backend << ":\n" << ranks[size_t(stage)].output;
    const ProcessResult& survivor = ranks[size_t(neighbour)];
    EXPECT_EQ(survivor.exit_code, 1) << backend << ":\n" << survivor.output;
    EXPECT_FALSE(survivor.timed_out) << backend;
    EXPECT_LT(survivor.seconds, 60) << backend << ": the receive waited instead of seeing its peer die";
    EXPECT_TRUE(contains(survivor.output, "dtrain train: error: recv<-" + std::to_string(stage) + " #")) << backend << ":\n" << survivor.output;
    EXPECT_TRUE(contains(survivor.output, "on group pp (ranks 0-1) failed on rank " + std::to_string(neighbour)))
        << backend << ":\n" << survivor.output;
    EXPECT_TRUE(contains(survivor.output, "rank " + std::to_string(stage) + " did not answer")) << backend << ":\n" << survivor.output;
  }
}

INSTANTIATE_TEST_SUITE_P(PipelineKill, KilledStage, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) { return "stage" + std::to_string(info.param); });

}  // namespace
}  // namespace dtrain::test

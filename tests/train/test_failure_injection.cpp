// train.inject_failure (train/failure_injection.h): what the key refuses, that an entry kills the
// rank it names where it names, and that a job killed at twenty random places by the soak script
// (scripts/soak_failures.sh) ends with the parameters of the uninterrupted job.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/process.h"
#include "support/scratch.h"
#include "train/failure_injection.h"
#include "config_refusal.h"
#include "equivalence.h"

namespace dtrain::test {
namespace {

std::string inject(const std::string& entries) { return "train.inject_failure=" + entries; }

TEST(InjectFailure, BadEntriesAreRefusedNamingTheKeyAndEntry) {
  const Sets job = {"model.preset=tiny", "train.steps=6"};
  const std::vector<BadInput> cases = {
      {job + Sets{inject(R"({"rank":1,"step":3,"phase":"backward"})")}, 2,
       "'train.inject_failure' must be a list of {\"rank\", \"step\", \"phase\"[, \"round\"]} objects, got {\"phase\":\"backward\",\"rank\":1,\"step\":3}"},
      {job + Sets{inject(R"(["1:3:backward"])")}, 2,
       "'train.inject_failure' entries must be objects like {\"rank\": 1, \"step\": 5, \"phase\": \"backward\"}; entry 0 is \"1:3:backward\""},
      {job + Sets{inject(R"([{"rank":1,"step":3}])")}, 2, "'train.inject_failure[0]' has no \"phase\" ({\"rank\":1,\"step\":3})"},
      {job + Sets{inject(R"([{"rank":0,"step":2,"phase":"save"},{"rank":1,"step":3,"phase":"fwd"}])")}, 2,
       "'train.inject_failure[1].phase' must be \"forward\", \"backward\", \"collective\", \"optimizer\", \"step\", \"write\", "
       "\"save\", \"manifest\", \"commit\", \"pipeline\" or \"async_write\", got \"fwd\""},
      {job + Sets{inject(R"([{"rank":1,"step":0,"phase":"forward"}])")}, 2,
       "'train.inject_failure[0].step' must be between 1 and 6, got 0"},
      {job + Sets{inject(R"([{"rank":1,"step":7,"phase":"forward"}])")}, 2,
       "'train.inject_failure[0].step' must be between 1 and 6, got 7"},
      {job + Sets{inject(R"([{"rank":-1,"step":3,"phase":"forward"}])")}, 2,
       "'train.inject_failure[0].rank' must be at least 0, got -1"},
      {job + Sets{inject(R"([{"rank":1,"step":3,"phase":"forward","round":-2}])")}, 2,
       "'train.inject_failure[0].round' must be at least 0, got -2"},
      {job + Sets{inject(R"([{"rank":1,"step":3,"phase":"forward","at":"start"}])")}, 2,
       "'train.inject_failure[0]' has an unknown field \"at\"; its fields are \"rank\", \"step\", \"phase\" or \"round\""},
      {job + Sets{inject(R"([{"rank":1,"step":3,"phase":"commit"}])")}, 2,
       "'train.inject_failure[0]' names rank 1 at phase \"commit\", which only rank 0 reaches (it commits checkpoints)"},
      {Sets{"model.arch=gpt2", "model.n_layer=4", "parallel.pp=2", "train.steps=6", inject(R"([{"rank":1,"step":3,"phase":"backward"}])")}, 2,
       "'train.inject_failure[0].phase' \"backward\" is a point of the data-parallel step, which a pipeline (parallel.pp 2) does not run; "
       "\"pipeline\" kills a stage mid-step"},
      {job + Sets{inject(R"([{"rank":1,"step":3,"phase":"pipeline"}])")}, 2,
       "'train.inject_failure[0].phase' \"pipeline\" is reached only under pipeline parallelism (parallel.pp > 1)"},
      {job + Sets{inject(R"([{"rank":1,"step":3,"phase":"async_write"}])")}, 2,
       "'train.inject_failure[0].phase' \"async_write\" is reached only by asynchronous saves (checkpoint.async: true)"},
      {job + Sets{"checkpoint.async=true", inject(R"([{"rank":1,"step":3,"phase":"write"}])")}, 2,
       "'train.inject_failure[0].phase' \"write\" is a point of a synchronous save; under checkpoint.async it is \"async_write\""},
  };
  for (const auto& bad : cases) EXPECT_EQ(refusal_of(bad.sets, bad.world), "cfg.json: " + bad.error);
}

// A rank the job does not have is refused by the launcher, before any process starts.
TEST(InjectFailure, ARankTheJobDoesNotHaveIsRefusedBeforeTheStart) {
  const TrainConfig c = resolved({"model.preset=tiny", inject(R"([{"rank":2,"step":1,"phase":"forward"}])")}, 2);
  try {
    require_injected_ranks_exist(c.inject_failure, 2);
    ADD_FAILURE() << "rank 2 of a 2-rank job was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "'train.inject_failure[0].rank' is 2, and the job has 2 rank(s): the injection would never fire");
  }
}

TEST(InjectFailure, AnArmedConfigSaysSoLoudly) {
  const TrainConfig c =
      resolved({"model.preset=tiny", inject(R"([{"rank":1,"step":3,"phase":"backward"},{"rank":0,"step":5,"phase":"save","round":1}])")}, 2);
  ASSERT_EQ(c.inject_failure.size(), 2u);
  EXPECT_EQ(c.inject_failure[0].entry(), "backward:3:0:1");  // DTRAIN_CRASH_AT's form: round 0 unless named
  EXPECT_EQ(c.inject_failure[1].entry(), "save:5:1:0");
  EXPECT_EQ(c.warnings.back(),
            "fault injection armed (train.inject_failure): SIGKILL to rank 1 at step 3 (backward) in round 0; rank 0 at step 5 (save) "
            "in round 1. A run for real must not set this key");
  EXPECT_TRUE(resolved({"model.preset=tiny"}, 2).inject_failure.empty());
}

// Deterministic kernels and a checkpoint every step: the restarted job repeats the killed step
// exactly, so the parameters it ends with are the uninterrupted job's, bit for bit.
const Sets kInjectedJob = {"train.steps=5", "train.deterministic=true", "checkpoint.every_steps=1"};

// Rank 1 dies in backward of step 3 (round 0): the launcher reports rank 1 killed by SIGKILL,
// restarts the job once, and the restart resumes from step 2's checkpoint, not dying again there.
// An injection that did not fire would leave no failure to report, and the test fails.
TEST(InjectFailure, AKilledRankRestartsAndEndsLikeTheUninterruptedRun) {
  const std::string dir = scratch_dir("injected_backward");
  const TrainingRun killed =
      train(dir, 2, kInjectedJob + Sets{inject(R"([{"rank":1,"step":3,"phase":"backward"}])")}, {"--max-restarts", "1"});
  ASSERT_EQ(killed.result.exit_code, 0) << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "fault injection armed (train.inject_failure): SIGKILL to rank 1 at step 3 (backward)"))
      << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "dtrain launch: rank 1 failed: signal 9 (SIGKILL)")) << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "resumed from " + ckpt(dir, 2) + " at step 2")) << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "the job succeeded after 1 restart")) << killed.result.output;
  const TrainingRun straight = train(scratch_dir("injected_backward_straight"), 2, kInjectedJob);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  ASSERT_EQ(killed.steps.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(killed.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>()) << "step " << i + 1;
  expect_same_parameters(final_parameters(killed, 5), final_parameters(straight, 5));
}

// Without restarts the job stops at the injection: the kill is the job's end, not a warning.
TEST(InjectFailure, WithoutRestartsTheJobFailsThere) {
  const std::string dir = scratch_dir("injected_collective");
  const TrainingRun killed = train(dir, 2, kInjectedJob + Sets{inject(R"([{"rank":0,"step":2,"phase":"collective"}])")});
  EXPECT_NE(killed.result.exit_code, 0) << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "dtrain launch: rank 0 failed: signal 9 (SIGKILL)")) << killed.result.output;
  EXPECT_EQ(killed.steps.size(), 1u) << killed.result.output;  // step 1 logged, step 2 never finished
  EXPECT_TRUE(std::filesystem::exists(ckpt(dir, 1)));
  EXPECT_FALSE(std::filesystem::exists(ckpt(dir, 2)));
}

// The soak: twenty injections at seeded random ranks, steps and phases, each in its own round; the
// script checks each landed where aimed and compares the final shards byte for byte, and the
// parameters are compared here again by name.
TEST(InjectFailure, TwentyRandomInjectionsEndWithTheUninterruptedRunsParameters) {
  const std::string dir = scratch_dir("soak");
  const ProcessResult soak =
      run_process({DTRAIN_SOURCE_DIR "/scripts/soak_failures.sh", "--injections", "20", "--seed", "31", "--dir", dir, "--dtrain", DTRAIN_BIN}, 170);
  ASSERT_EQ(soak.exit_code, 0) << soak.output;
  EXPECT_TRUE(contains(soak.output, "equal to the uninterrupted run's, bit for bit")) << soak.output;
  int rows_ok = 0;
  for (size_t at = soak.output.find(" ok\n"); at != std::string::npos; at = soak.output.find(" ok\n", at + 1)) ++rows_ok;
  EXPECT_EQ(rows_ok, 20) << soak.output;
  const std::string latest = read_text_file(dir + "/uninterrupted/ckpt/latest");
  const std::string step_dir = latest.substr(0, latest.find('\n'));
  expect_same_parameters(read_parameters(dir + "/injected/ckpt/" + step_dir), read_parameters(dir + "/uninterrupted/ckpt/" + step_dir));
}

}  // namespace
}  // namespace dtrain::test

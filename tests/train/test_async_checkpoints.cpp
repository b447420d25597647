// checkpoint.async: saves written in the background hold exactly what saves in the step hold, one is
// written at a time, a kill during a background write leaves the previous checkpoint to resume from,
// and a background write that fails stops the run naming the rank.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/sharded_checkpoint.h"
#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"

using namespace dtrain;
using namespace dtrain::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const Sets kAsync = {"checkpoint.async=true"};
const Sets kEveryTwo = {"train.steps=6", "train.deterministic=true", "checkpoint.every_steps=2", "checkpoint.keep=0"};

// Each background save of these steps, on both ranks, starts writing only when the training thread
// waits for it (the next save, the run's end): one that read the live state rather than its copy
// would write a later step's values.
std::string held_saves(const std::vector<int>& steps) {
  std::string list;
  for (int s : steps)
    for (int rank : {0, 1}) list += (list.empty() ? "" : ",") + std::to_string(s) + ":" + std::to_string(rank);
  return "DTRAIN_INJECT_SLOW_SAVE=" + list;
}

// What a checkpoint holds of the training state: every tensor whole (parameters and optimizer state)
// and the progress. Not the CPU generator, which two runs of one config leave in different states.
void expect_same_checkpoint(const std::string& got, const std::string& expected) {
  SCOPED_TRACE(got + " against " + expected);
  std::map<std::string, at::Tensor> got_tensors, expected_tensors;
  ShardedCheckpointReader a(got), b(expected);
  for (const auto& entry : a.tensors()) got_tensors[entry.first] = a.read(entry.first);
  for (const auto& entry : b.tensors()) expected_tensors[entry.first] = b.read(entry.first);
  expect_same_parameters(got_tensors, expected_tensors);
  EXPECT_EQ(json::parse(read_text_file(got + "/trainer_state.json")), json::parse(read_text_file(expected + "/trainer_state.json")));
}

void expect_same_losses(const TrainingRun& got, const TrainingRun& expected) {
  ASSERT_EQ(got.steps.size(), expected.steps.size());
  for (size_t i = 0; i < got.steps.size(); ++i) {
    EXPECT_EQ(got.steps[i]["step"], expected.steps[i]["step"]);
    EXPECT_EQ(got.steps[i]["loss"].get<double>(), expected.steps[i]["loss"].get<double>()) << "step " << i + 1;
  }
}

// metrics.jsonl's lines about checkpoints, by step.
std::map<int, json> checkpoint_metrics(const std::string& run_dir) {
  std::map<int, json> out;
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    if (auto j = json::parse(line); j.contains("checkpoint_stall_s")) out[j["step"].get<int>()] = j;
  return out;
}

// What a rank's log says its state was copied into for background saves, MiB; -1 when it says nothing.
double copied_mib(const std::string& run_dir, int rank) {
  std::smatch m;
  const std::string log = read_text_file(run_dir + "/rank-" + std::to_string(rank) + ".log");
  return std::regex_search(log, m, std::regex(R"(this rank's state is copied into ([0-9.]+) MiB)")) ? std::stod(m[1].str()) : -1;
}

}  // namespace

TEST(AsyncCheckpoints, BackgroundSavesHoldExactlyWhatSavesInTheStepHold) {
  const TrainingRun in_step = train(scratch_dir("async_reference"), 2, kEveryTwo);
  ASSERT_EQ(in_step.result.exit_code, 0) << in_step.result.output;
  const TrainingRun background = train(scratch_dir("async_saves"), 2, kEveryTwo + kAsync, {}, {held_saves({2, 4})});
  ASSERT_EQ(background.result.exit_code, 0) << background.result.output;
  EXPECT_TRUE(contains(background.result.output, "written in the background in")) << background.result.output;
  expect_same_losses(background, in_step);
  for (int step : {2, 4, 6}) expect_same_checkpoint(ckpt(background.dir, step), ckpt(in_step.dir, step));
  // The run's end waited for the last save: it is committed, and `latest` names it.
  EXPECT_EQ(read_text_file(background.dir + "/ckpt/latest"), CheckpointManager::step_dir_name(6) + "\n");
  const auto metrics = checkpoint_metrics(background.dir);
  ASSERT_EQ(metrics.size(), 3u);
  for (const auto& [step, line] : metrics) {
    EXPECT_GE(line["checkpoint_stall_s"].get<double>(), 0) << line;
    EXPECT_GT(line["checkpoint_write_s"].get<double>(), 0) << line;
  }
}

// A rank copies for a background save only what it writes: under DDP rank 1 holds the same state as
// rank 0, which writes it, so it copies the optimizer's scalars alone; under ZeRO-2 each copies its
// shard of the optimizer's moments (0.13 MiB) and rank 0 the replicated weights too (0.13 MiB). The
// checkpoints are those of saves in the step either way.
TEST(AsyncCheckpoints, EachRankCopiesOnlyWhatItWrites) {
  const TrainingRun ddp = train(scratch_dir("async_copies_ddp"), 2, kEveryTwo + kAsync);
  ASSERT_EQ(ddp.result.exit_code, 0) << ddp.result.output;
  EXPECT_GT(copied_mib(ddp.dir, 0), 0.3);  // the tiny model's weights and AdamW's two moments: 0.4 MiB
  EXPECT_EQ(copied_mib(ddp.dir, 1), 0.0);
  const Sets zero2 = kEveryTwo + Sets{"zero_optimization.stage=2"};
  const TrainingRun in_step = train(scratch_dir("async_copies_zero2_reference"), 2, zero2);
  const TrainingRun background = train(scratch_dir("async_copies_zero2"), 2, zero2 + kAsync, {}, {held_saves({2, 4})});
  ASSERT_EQ(background.result.exit_code, 0) << background.result.output;
  EXPECT_EQ(copied_mib(background.dir, 0), 0.3);
  EXPECT_EQ(copied_mib(background.dir, 1), 0.1);
  for (int step : {2, 4, 6}) expect_same_checkpoint(ckpt(background.dir, step), ckpt(in_step.dir, step));
}

// Saves every step, the one of step 2 held back until the save of step 3 waits for it: that save
// finds it being written and says so, and every checkpoint is committed whole.
TEST(AsyncCheckpoints, OneSaveIsWrittenAtATimeTheNextWaitsAndNoneIsLost) {
  const Sets job = {"train.steps=4", "train.deterministic=true", "checkpoint.every_steps=1", "checkpoint.keep=0"};
  const TrainingRun in_step = train(scratch_dir("async_every_step_reference"), 2, job);
  ASSERT_EQ(in_step.result.exit_code, 0) << in_step.result.output;
  const TrainingRun background = train(scratch_dir("async_every_step"), 2, job + kAsync, {}, {held_saves({2})});
  ASSERT_EQ(background.result.exit_code, 0) << background.result.output;
  EXPECT_TRUE(contains(background.result.output, "the save of step 3 waited ")) << background.result.output;
  EXPECT_TRUE(contains(background.result.output, " s for the save of step 2 to be written (checkpoint.async writes one at a time)"))
      << background.result.output;
  for (int step = 1; step <= 4; ++step) {
    EXPECT_NO_THROW(CheckpointManager::verify(ckpt(background.dir, step))) << step;
    expect_same_checkpoint(ckpt(background.dir, step), ckpt(in_step.dir, step));
  }
  const auto metrics = checkpoint_metrics(background.dir);
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_GT(metrics.at(3)["checkpoint_wait_s"].get<double>(), 0);
  EXPECT_GE(metrics.at(3)["checkpoint_stall_s"].get<double>(), metrics.at(3)["checkpoint_wait_s"].get<double>());
}

// kill -9 of rank 1 while its background thread writes the save of step 4 (files written, nothing
// agreed): step 4 is never committed, the restarted job resumes step 2's checkpoint and ends where
// the uninterrupted run ends.
TEST(AsyncCheckpoints, AKillDuringABackgroundWriteResumesThePreviousCheckpointAndEndsLikeTheUninterruptedRun) {
  const Sets job = {"train.steps=8", "train.deterministic=true", "checkpoint.every_steps=2", "checkpoint.keep=0"};
  const TrainingRun straight = train(scratch_dir("async_kill_reference"), 2, job);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  const std::string dir = scratch_dir("async_kill");
  const TrainingRun killed = train(dir, 2, job + kAsync, {"--max-restarts", "1"}, {"DTRAIN_CRASH_AT=async_write:4:0:1"});
  ASSERT_EQ(killed.result.exit_code, 0) << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "restarting the job (restart 1 of 1)")) << killed.result.output;
  EXPECT_TRUE(contains(killed.result.output, "resumed from " + ckpt(dir, 2) + " at step 2")) << killed.result.output;
  EXPECT_FALSE(contains(killed.result.output, "skipped")) << "a damaged checkpoint was committed\n" << killed.result.output;
  expect_same_losses(killed, straight);
  expect_same_parameters(final_parameters(killed, 8), final_parameters(straight, 8));
  for (int step : {4, 8}) expect_same_checkpoint(ckpt(dir, step), ckpt(straight.dir, step));
  EXPECT_FALSE(fs::exists(ckpt(dir, 4) + ".tmp"));
}

// A background write that fails on rank 1 (a full disk) stops the run at a step boundary with an
// error naming the rank and the file; nothing of that save is kept and step 2 stays the newest.
TEST(AsyncCheckpoints, AFailedBackgroundWriteStopsTheRunNamingTheRankAndKeepsThePreviousCheckpoint) {
  const std::string dir = scratch_dir("async_save_failure");
  const auto ranks = train_ranks_alone(dir, 2, kEveryTwo + kAsync + Sets{"dist.timeout_s=60"}, {"DTRAIN_INJECT_SAVE_FAILURE=4:1"});
  EXPECT_NE(ranks[1].exit_code, 0);
  EXPECT_TRUE(contains(ranks[1].output, "the checkpoint of step 4, written in the background, failed on rank 1: cannot write " +
                                            ckpt(dir, 4) + ".tmp: no space left on device (injected); the newest checkpoint stays " +
                                            ckpt(dir, 2)))
      << ranks[1].output;
  EXPECT_NE(ranks[0].exit_code, 0);
  EXPECT_TRUE(fs::exists(ckpt(dir, 2)));
  EXPECT_NO_THROW(CheckpointManager::verify(ckpt(dir, 2)));
  EXPECT_FALSE(fs::exists(ckpt(dir, 4)));
  EXPECT_FALSE(fs::exists(ckpt(dir, 4) + ".tmp"));
  EXPECT_EQ(read_text_file(dir + "/ckpt/latest"), CheckpointManager::step_dir_name(2) + "\n");
}

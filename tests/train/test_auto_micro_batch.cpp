// train_micro_batch_size_per_gpu "auto" decided by memory (train/auto_micro_batch.h): the largest
// power of two whose estimate fits the budget, a refusal naming the key when nothing fits, numbers
// given left alone, and a run that logs its choice and trains with it.
#include <gtest/gtest.h>

#include "common/byte_words.h"
#include "support/process.h"
#include "support/scratch.h"
#include "tools/estimate/memory_estimate.h"
#include "train/auto_micro_batch.h"
#include "train/estimate_layout.h"
#include "train/training_run.h"

namespace dtrain {
namespace {

// A Hugging Face Trainer's config: the accumulation given, the micro-batch and global batch "auto".
const std::vector<std::string> kTrainerStyle = {"gradient_accumulation_steps=2", "train_micro_batch_size_per_gpu=auto"};

TrainConfig tiny_config(const std::vector<std::string>& sets, int world_size = 1) {
  std::vector<std::string> all{"model.preset=tiny"};
  all.insert(all.end(), sets.begin(), sets.end());
  return load_train_config("", all, world_size);
}

// The estimated peak of one rank of `c` (CPU, one rank per node) at micro-batch `micro_batch`.
double estimated_peak(const TrainConfig& c, int64_t micro_batch) {
  MemoryLayout layout = estimate_layout(c, true, 1);
  layout.micro_batch = micro_batch;
  return estimate_memory(layout).most_loaded().device_bytes();
}

std::string micro_batch_refusal(const TrainConfig& c, double budget) {
  try {
    choose_micro_batch(c, {budget, "the test"}, true, 1);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AutoMicroBatch, TakesTheLargestPowerOfTwoWhoseEstimateFits) {
  const TrainConfig c = tiny_config(kTrainerStyle);
  ASSERT_EQ(c.micro_batch_auto_cap, TrainConfig::kAutoMicroBatchCap);
  const double four = estimated_peak(c, 4), eight = estimated_peak(c, 8);
  ASSERT_LT(four, eight);
  const MicroBatchChoice choice = choose_micro_batch(c, {(four + eight) / 2, "the test"}, true, 1);
  EXPECT_EQ(choice.micro_batch, 4) << choice.line;
  EXPECT_NE(choice.line.find("train_micro_batch_size_per_gpu auto: 4, the largest power of two that fits"), std::string::npos) << choice.line;
  EXPECT_NE(choice.line.find("8 would need"), std::string::npos) << choice.line;
  // Exactly the estimate of 4 is still enough.
  EXPECT_EQ(choose_micro_batch(c, {four, "the test"}, true, 1).micro_batch, 4);
}

TEST(AutoMicroBatch, SettingItMakesTheGlobalBatch) {
  TrainConfig c = tiny_config(kTrainerStyle, 2);
  set_micro_batch(c, 4);
  EXPECT_EQ(c.global_batch, 4 * 2 * 2);
  EXPECT_EQ(c.json["train_micro_batch_size_per_gpu"], 4);
  EXPECT_EQ(c.json["train_batch_size"], 16);
}

TEST(AutoMicroBatch, NothingFittingIsRefusedNamingTheKey) {
  const TrainConfig c = tiny_config(kTrainerStyle);
  const std::string msg = micro_batch_refusal(c, estimated_peak(c, 1) - 1);
  EXPECT_NE(msg.find("train_micro_batch_size_per_gpu \"auto\": not even a micro-batch of 1 fits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.memory_budget"), std::string::npos) << msg;
}

TEST(AutoMicroBatch, WithoutAnyBatchKeyItOnlyLowersTheDefault) {
  const TrainConfig c = tiny_config({"train_micro_batch_size_per_gpu=auto"});
  ASSERT_EQ(c.micro_batch_auto_cap, 8);
  const MicroBatchChoice roomy = choose_micro_batch(c, {1e12, "the test"}, true, 1);
  EXPECT_EQ(roomy.micro_batch, 8);
  EXPECT_NE(roomy.line.find("8 is the most auto takes without a batch key"), std::string::npos) << roomy.line;
  EXPECT_EQ(choose_micro_batch(c, {estimated_peak(c, 2), "the test"}, true, 1).micro_batch, 2);
}

TEST(AutoMicroBatch, NumbersGivenAreLeftAlone) {
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"train_micro_batch_size_per_gpu=4", "gradient_accumulation_steps=2"},
           {"train_micro_batch_size_per_gpu=auto", "train_batch_size=32", "gradient_accumulation_steps=2"},
           {"train_micro_batch_size_per_gpu=auto", "train_batch_size=32"}}) {
    const TrainConfig c = tiny_config(sets, 2);
    EXPECT_EQ(c.micro_batch_auto_cap, 0) << sets[1];
  }
  EXPECT_EQ(tiny_config({"train_micro_batch_size_per_gpu=auto", "train_batch_size=32", "gradient_accumulation_steps=2"}, 2).micro_batch, 8);
  EXPECT_EQ(tiny_config({"train_micro_batch_size_per_gpu=auto", "train_batch_size=32"}, 2).micro_batch, 16);
}

TEST(AutoMicroBatch, ALayoutWithoutAnEstimateKeepsWhatItDidBefore) {
  const std::string unmodelled = "train.freeze=[\"blocks.0.q_proj.weight\"]";
  const TrainConfig trainer_style = tiny_config({kTrainerStyle[0], kTrainerStyle[1], unmodelled});
  const std::string msg = micro_batch_refusal(trainer_style, 1e12);
  EXPECT_NE(msg.find("train_micro_batch_size_per_gpu \"auto\" is decided by the memory estimate, which has no estimate for "
                     "frozen blocks.0.q_proj.weight"),
            std::string::npos)
      << msg;
  const MicroBatchChoice unset = choose_micro_batch(tiny_config({"train_micro_batch_size_per_gpu=auto", unmodelled}), {1e12, "the test"}, true, 1);
  EXPECT_EQ(unset.micro_batch, 8);
  EXPECT_NE(unset.line.find("8, the default, as memory cannot decide: no estimate for"), std::string::npos) << unset.line;
}

// The run and `dtrain estimate` choose for train.memory_budget when it is given, else for their device's memory.
TEST(AutoMicroBatch, TheConfiguredBudgetElseTheDevices) {
  const MemoryBudget device{1e9, "the device"};
  const MemoryBudget unset = configured_or(tiny_config({}), device);
  EXPECT_EQ(unset.bytes, 1e9);
  EXPECT_EQ(unset.from, "the device");
  const MemoryBudget given = configured_or(tiny_config({"train.memory_budget=5000000"}), device);
  EXPECT_EQ(given.bytes, 5e6);
  EXPECT_EQ(given.from, "train.memory_budget");
  EXPECT_EQ(rank_memory_budget(tiny_config({"train.memory_budget=5000000"}), at::Device(at::kCPU), 2).bytes, 5e6);
}

// `dtrain config check` prints the micro-batch the run would choose, and the estimate the run compares
// itself with, which counts parallel.modules' stage-0 modules whole on every rank.
TEST(AutoMicroBatch, ConfigCheckShowsTheRunsChoiceAndEstimate) {
  const std::vector<std::string> plan = {"zero_optimization.stage=3",
                                         "parallel.modules={\"blocks.0.*\": {\"zero_stage\": 0}, \"*\": {\"zero_stage\": 3}}"};
  std::vector<std::string> sets = {kTrainerStyle[0], kTrainerStyle[1]};
  sets.insert(sets.end(), plan.begin(), plan.end());
  const TrainConfig c = tiny_config(sets, 2);
  const double budget = (estimated_peak(c, 2) + estimated_peak(c, 4)) / 2;
  std::vector<std::string> args = {DTRAIN_BIN, "config", "check", "--world-size", "2", "--set", "model.preset=tiny", "--set",
                                   "train.memory_budget=" + std::to_string(int64_t(budget))};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  const test::ProcessResult r = test::run_process(args, 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train_micro_batch_size_per_gpu auto: 2, the largest power of two that fits"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("batch      8 = micro 2 x accumulation 2 x dp 2"), std::string::npos) << r.output;
  // Counted whole, block 0's state makes the estimate larger than with every block sharded.
  const double kept_whole = estimated_peak(c, 2);
  EXPECT_GT(kept_whole, estimated_peak(tiny_config({kTrainerStyle[0], kTrainerStyle[1], plan[0]}, 2), 2));
  EXPECT_NE(r.output.find("memory     estimated " + byte_words(kept_whole) + " per rank at its peak"), std::string::npos) << r.output;
}

TEST(AutoMicroBatch, TrainingLogsItsChoiceAndTrainsWithIt) {
  using test::kBase;
  const std::vector<std::string> sets = {kTrainerStyle[0], kTrainerStyle[1], "train.steps=1", "checkpoint.save_at_end=false"};
  std::vector<std::string> all = kBase;
  all.insert(all.end(), sets.begin(), sets.end());
  const TrainConfig c = load_train_config("", all, 1);
  const double budget = (estimated_peak(c, 2) + estimated_peak(c, 4)) / 2;
  std::vector<std::string> with_budget = sets;
  with_budget.push_back("train.memory_budget=" + std::to_string(int64_t(budget)));
  const test::TrainingRun run = test::train(scratch_dir("auto_micro_batch_run"), 1, with_budget);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_NE(run.result.output.find("train_micro_batch_size_per_gpu auto: 2, the largest power of two that fits"), std::string::npos)
      << run.result.output;
  EXPECT_NE(run.result.output.find("batch: 4 = micro 2 x accumulation 2"), std::string::npos) << run.result.output;
  const nlohmann::json written = nlohmann::json::parse(read_text_file(run.dir + "/config.json"));
  EXPECT_EQ(written["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(written["train_batch_size"], 4);
}

}  // namespace
}  // namespace dtrain

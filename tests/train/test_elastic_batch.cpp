// What training does when the number of data-parallel ranks changes between two starts of a run
// (an elastic restart, or a resume at another size): the global batch it trains with
// (elastic.batch_policy), the data position it continues from (every sample of an epoch at most
// once, none skipped), and the metrics line that marks the change.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/number_text.h"
#include "data/distributed_sampler.h"
#include "drawn_samples.h"
#include "support/process.h"
#include "support/scratch.h"
#include "training_run.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// A text corpus of 105 windows of the tiny model's 16 tokens: 100 training samples and 5 for validation.
std::string corpus(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 105 * 16 + 1; ++i) text += char('a' + (i * 7 + i / 26) % 26);
  const std::string path = dir + "/corpus.txt";
  std::ofstream(path) << text;
  return "data.source=text:" + path;
}
constexpr int64_t kSamples = 100;

// The first `n` samples of `epoch`'s permutation (train.seed 7, the randperm order a small corpus gets).
std::vector<int64_t> permutation_head(int64_t epoch, int64_t n) {
  DistributedSampler one(kSamples, 1, 0, {true, 7, true, ShuffleOrder::Randperm});
  one.set_epoch(epoch);
  const std::vector<int64_t> all = one.indices();
  return {all.begin(), all.begin() + n};
}

std::vector<nlohmann::json> membership_lines(const std::string& dir) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == "membership") lines.push_back(j);
  }
  return lines;
}

}  // namespace

// 4 ranks stop after 6 steps of 8 samples; 2 ranks (accumulation 2) go on to step 16, into the second
// epoch (12 steps use 96 of the 100 samples; the tail of 4 is dropped whatever the ranks). What the
// two starts drew together is what 4 ranks drew without a stop: the same samples, each once per epoch.
TEST(ElasticBatch, TheSamplesOfARunResumedAtAnotherDataParallelSizeAreThoseOfAnUninterruptedRun) {
  const std::string dir = scratch_dir("elastic_position"), straight_dir = scratch_dir("elastic_position_straight");
  const Sets job = {corpus(dir), "train.steps=16", "train_micro_batch_size_per_gpu=2"};
  ASSERT_EQ(train(dir, 4, job + Sets{"train.stop_at_step=6"}, {}, {"DTRAIN_LOG_SAMPLES=" + dir + "/samples"}).result.exit_code, 0);
  const TrainingRun resumed = train(dir, 2, job, {}, {"DTRAIN_LOG_SAMPLES=" + dir + "/samples"});
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_TRUE(contains(resumed.result.output, "kept on 2 data-parallel rank(s) as micro-batch 2 x accumulation 2")) << resumed.result.output;
  const TrainingRun straight = train(straight_dir, 4, job, {}, {"DTRAIN_LOG_SAMPLES=" + straight_dir + "/samples"});
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;

  const auto got = drawn(dir + "/samples"), expected = drawn(straight_dir + "/samples");
  EXPECT_EQ(total(expected), 16 * 8);
  EXPECT_EQ(total(got), 16 * 8);
  EXPECT_EQ(got, expected);
  for (const auto& [key, count] : got) EXPECT_EQ(count, 1) << "epoch " << key.first << " sample " << key.second;
  int64_t first_epoch = 0;
  for (const auto& [key, count] : got) first_epoch += key.first == 0;
  EXPECT_EQ(first_epoch, 96);
}

// 4 ranks at a global batch of 16 (micro-batch 2, accumulation 2) stop after 3 steps; 3 ranks cannot
// make 16, so under the default policy they take the nearest batch they can, 18, at the same
// learning rate. 48 samples do not divide among 3 ranks; the run still goes on from sample 48 of the
// permutation: 5 steps to 84 + 18 > 100 end the epoch, step 6 starts the next one.
TEST(ElasticBatch, ANewGlobalBatchContinuesThePermutationWithoutRepeatingOrSkippingASample) {
  const std::string dir = scratch_dir("elastic_nearest");
  const Sets job = {corpus(dir), "train.steps=6", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=2"};
  ASSERT_EQ(train(dir, 4, job + Sets{"train.stop_at_step=3"}, {}, {"DTRAIN_LOG_SAMPLES=" + dir + "/samples"}).result.exit_code, 0);
  const TrainingRun resumed = train(dir, 3, job, {}, {"DTRAIN_LOG_SAMPLES=" + dir + "/samples"});
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_TRUE(contains(resumed.result.output, "was trained with a global batch of 16, which 3 data-parallel rank(s) with micro-batch 2 "
                                              "cannot make: this run trains with the nearest global batch they can, 18 (accumulation 3), "
                                              "at the same learning rate (elastic.batch_policy=keep)")) << resumed.result.output;
  ASSERT_EQ(resumed.steps.size(), 6u);

  std::map<std::pair<int64_t, int64_t>, int> expected;
  for (int64_t s : permutation_head(0, 84)) ++expected[{0, s}];
  for (int64_t s : permutation_head(1, 18)) ++expected[{1, s}];
  const auto got = drawn(dir + "/samples");
  EXPECT_EQ(total(got), 3 * 16 + 3 * 18);
  EXPECT_EQ(got, expected);
}

// scale_lr: 2 ranks train with the config's batch (2 x 1 x 2 = 4, not the checkpoint's 8) at half the
// learning rate, which the optimizer uses (metrics' lr), and a later resume keeps the factor.
// fail: refused before any step, naming the key.
TEST(ElasticBatch, ScaleLrScalesTheRateTheOptimizerUsesAndFailRefuses) {
  const std::string dir = scratch_dir("elastic_scale"), straight_dir = scratch_dir("elastic_scale_straight");
  const Sets job = {corpus(dir), "train.steps=6", "train_micro_batch_size_per_gpu=2"};
  ASSERT_EQ(train(dir, 4, job + Sets{"train.stop_at_step=3"}).result.exit_code, 0);
  const TrainingRun straight = train(straight_dir, 4, job);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;

  // Each rank refuses with the exit code of a refused configuration (the launcher then restarts nothing).
  for (const ProcessResult& rank : train_ranks_alone(dir, 3, job + Sets{"elastic.batch_policy=fail"})) {
    EXPECT_EQ(rank.exit_code, 2) << rank.output;
    EXPECT_TRUE(contains(rank.output, "elastic.batch_policy=fail: the checkpoint " + ckpt(dir, 3) +
                                          " was trained with a global batch of 8, which 3 data-parallel rank(s)")) << rank.output;
  }
  const TrainingRun bad = train(dir, 2, job + Sets{"elastic.batch_policy=linear"});
  EXPECT_NE(bad.result.exit_code, 0) << bad.result.output;
  EXPECT_TRUE(contains(bad.result.output, "'elastic.batch_policy' must be \"keep\", \"scale_lr\" or \"fail\", got \"linear\"")) << bad.result.output;

  const Sets scaled = job + Sets{"elastic.batch_policy=scale_lr"};
  const TrainingRun half = train(dir, 2, scaled + Sets{"train.stop_at_step=5"});
  ASSERT_EQ(half.result.exit_code, 0) << half.result.output;
  EXPECT_TRUE(contains(half.result.output, "this run trains with 4 (micro-batch 2 x accumulation 1 x 2 data-parallel rank(s), "
                                           "elastic.batch_policy=scale_lr) and scales the learning rate linearly by 4/8 = 0.5000")) << half.result.output;
  const TrainingRun rest = train(dir, 2, scaled);
  ASSERT_EQ(rest.result.exit_code, 0) << rest.result.output;
  ASSERT_EQ(rest.steps.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const double factor = i < 3 ? 1.0 : 0.5;
    EXPECT_NEAR(rest.steps[i]["lr"].get<double>(), factor * straight.steps[i]["lr"].get<double>(), 1e-12) << "step " << i + 1;
  }
  // A longer schedule on top: the warning names the rate the optimizer then uses, the factor included.
  const TrainingRun longer = train(dir, 2, scaled + Sets{"train.steps=8"});
  ASSERT_EQ(longer.result.exit_code, 0) << longer.result.output;
  ASSERT_EQ(longer.steps.size(), 8u);
  EXPECT_TRUE(contains(longer.result.output, "(train.steps 6 -> 8): at step 7 the learning rate is " + scientific(longer.steps[6]["lr"].get<double>())))
      << longer.result.output;
}

// A restart at another world size that the launcher announces: one membership line, before the first
// step at the new size, with the time from the failure to the end of that step plus the time of the
// steps done again (3 and 4: step 4's save failed, so the run resumes the checkpoint of step 2).
// Without the launcher's variables the resumed checkpoint's world size tells the change. A restart
// at the same size: none.
TEST(ElasticBatch, AChangeOfWorldSizeIsMarkedInTheMetricsWithTheTimeLost) {
  const std::string dir = scratch_dir("elastic_membership");
  const Sets job = {corpus(dir), "train.steps=6", "train_micro_batch_size_per_gpu=2", "checkpoint.every_steps=2"};
  const TrainingRun first = train(dir, 4, job, {}, {"DTRAIN_INJECT_SAVE_FAILURE=4:0"});
  ASSERT_NE(first.result.exit_code, 0) << first.result.output;
  ASSERT_EQ(first.steps.size(), 4u) << first.result.output;
  const double redone_s = first.steps[2]["step_s"].get<double>() + first.steps[3]["step_s"].get<double>();
  EXPECT_TRUE(membership_lines(dir).empty());

  const double failure = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - 100;
  const auto started = std::chrono::steady_clock::now();
  const TrainingRun second = train(dir, 2, job + Sets{"train.stop_at_step=4"}, {},
                                   {"DTRAIN_PREVIOUS_WORLD_SIZE=4", "DTRAIN_FAILURE_TIME=" + std::to_string(failure)});
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(second.result.exit_code, 0) << second.result.output;
  auto lines = membership_lines(dir);
  ASSERT_EQ(lines.size(), 1u) << second.result.output;
  EXPECT_EQ(lines[0]["step"], 2);
  EXPECT_EQ(lines[0]["old_world"], 4);
  EXPECT_EQ(lines[0]["new_world"], 2);
  const double lost_s = lines[0]["lost_s"].get<double>();
  EXPECT_GE(lost_s, 100 + redone_s);
  EXPECT_LE(lost_s, 100 + redone_s + run_s + 1);  // 1 s: std::to_string's microseconds, and the clocks' reads
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<std::string> order;  // the line comes after step 2's, before step 3's (checkpoint lines aside)
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    if (!record.contains("checkpoint_stall_s")) order.push_back(record.contains("event") ? "membership" : "step");
  }
  EXPECT_EQ(order, (std::vector<std::string>{"step", "step", "membership", "step", "step"}));
  EXPECT_TRUE(contains(second.result.output, "membership changed after step 2: 4 -> 2 ranks;")) << second.result.output;

  const TrainingRun third = train(dir, 4, job);
  ASSERT_EQ(third.result.exit_code, 0) << third.result.output;
  lines = membership_lines(dir);
  ASSERT_EQ(lines.size(), 2u) << third.result.output;
  EXPECT_EQ(lines[1]["step"], 4);
  EXPECT_EQ(lines[1]["old_world"], 2);
  EXPECT_EQ(lines[1]["new_world"], 4);
  EXPECT_EQ(lines[1]["lost_s"], 0.0);  // the checkpoint was the last step done: nothing redone, and no failure time

  const TrainingRun same = train(dir, 4, job + Sets{"train.steps=8"}, {},
                                 {"DTRAIN_PREVIOUS_WORLD_SIZE=4", "DTRAIN_FAILURE_TIME=" + std::to_string(failure)});
  ASSERT_EQ(same.result.exit_code, 0) << same.result.output;
  EXPECT_EQ(membership_lines(dir).size(), 2u);
}

}  // namespace dtrain::test

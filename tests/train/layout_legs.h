// A job trained in legs, each under another layout of its ranks, resuming where the previous one
// stopped, against the same job on one rank uninterrupted; and what a layout's checkpoint says of
// itself: its index, and what `dtrain generate` samples from it. For the tests that checkpoints
// stay layout-free (tensor and pipeline parallelism).
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"
#include "rewritten_checkpoint.h"

namespace dtrain::test {

// 6 steps of a global batch of 8 whatever the layout (micro-batches of 2, accumulated to fill it),
// every checkpoint kept.
inline const Sets kLayoutJob = {"train.steps=6", "train_batch_size=8", "train_micro_batch_size_per_gpu=2",
                                "gradient_accumulation_steps=auto", "checkpoint.every_steps=2", "checkpoint.keep=0"};
// Llama with grouped-query attention: 4 query heads reading 2 key/value heads.
inline const Sets kLlamaGqa = {"model.arch=llama", "model.n_head=4", "model.n_kv_head=2"};
// 4 blocks: pp 4, or pp 2 with 2 virtual stages, gives each chunk one.
inline const Sets kGpt2FourBlocks = {"model.arch=gpt2", "model.n_layer=4"};
inline const Sets kLlamaFourBlocks = kLlamaGqa + Sets{"model.n_layer=4"};
inline const Sets kTwoStagesInterleaved = {"parallel.pp=2", "parallel.pipeline.schedule=interleaved_1f1b",
                                           "parallel.pipeline.virtual_stages=2"};
// What a leg of that job on one rank says.
inline const std::string kSaysOneRank = "batch: 8 = micro 2 x accumulation 4 x dp 1";

// Part of a run: `ranks` ranks under `layout` train up to step `until`, resuming where the previous leg stopped.
struct Leg {
  int ranks;
  Sets layout;
  int until;
  std::string says;  // a line of the leg's output that shows its layout at work
};

// `job` in one run directory, leg by leg, the last leg ending at the job's train.steps; the last
// leg's run, whose metrics.jsonl holds every step.
inline TrainingRun train_in_legs(const std::string& name, const Sets& job, const std::vector<Leg>& legs) {
  const std::string dir = scratch_dir(name);
  TrainingRun run;
  int resumed_at = 0;
  for (const Leg& leg : legs) {
    const Sets stop = &leg != &legs.back() ? Sets{"train.stop_at_step=" + std::to_string(leg.until)} : Sets{};
    run = train(dir, leg.ranks, job + leg.layout + stop);
    if (run.result.exit_code != 0) {
      ADD_FAILURE() << "the leg to step " << leg.until << " on " << leg.ranks << " rank(s) failed:\n" << run.result.output;
      return run;
    }
    EXPECT_TRUE(contains(run.result.output, leg.says)) << "the leg to step " << leg.until << " never says '" << leg.says << "'";
    if (resumed_at > 0) {
      EXPECT_TRUE(contains(run.result.output, "resumed from " + ckpt(dir, resumed_at) + " at step " + std::to_string(resumed_at)))
          << run.result.output;
    }
    resumed_at = leg.until;
  }
  return run;
}

// The legs trained like `job` on one rank, uninterrupted, within the fp32 bounds of another
// summation order; returns their run directory. The one-rank run's is `name`_straight.
inline std::string expect_legs_train_like_one_rank(const std::string& name, const Sets& job, const std::vector<Leg>& legs) {
  const TrainingRun straight = train(scratch_dir(name + "_straight"), 1, job);
  EXPECT_EQ(straight.result.exit_code, 0) << straight.result.output;
  const TrainingRun resumed = train_in_legs(name, job, legs);
  expect_same_training(resumed, straight, legs.back().until);
  return resumed.dir;
}

// What `dtrain generate` samples from a checkpoint (the text alone, without the line naming it).
inline std::string generated(const std::string& step_dir) {
  const ProcessResult r = run_process({DTRAIN_BIN, "generate", "--checkpoint", step_dir, "--prompt", "The ", "--tokens", "24",
                                       "--temperature", "1", "--seed", "5"},
                                      60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string named = "generate: " + step_dir + "\n";
  EXPECT_TRUE(contains(r.output, named)) << r.output;
  std::string text = r.output;
  return text.erase(text.find(named), named.size());
}

// `dtrain generate` samples from `step_dir`, saved by several ranks, what it samples from the same
// tensors written whole by one rank.
inline void expect_generates_as_from_one_rank(const std::string& step_dir, const std::string& name) {
  namespace fs = std::filesystem;
  ASSERT_TRUE(fs::exists(step_dir + "/" + shard_file_name(1))) << step_dir << " was written by one rank";
  const std::string one_rank = scratch_dir(name) + "/" + fs::path(step_dir).filename().string();
  fs::copy(step_dir, one_rank, fs::copy_options::recursive);
  rewrite_as_one_rank(one_rank);
  ASSERT_FALSE(fs::exists(one_rank + "/" + shard_file_name(1)));
  const std::string text = generated(step_dir);
  EXPECT_TRUE(contains(text, "The ")) << text;
  EXPECT_EQ(text, generated(one_rank)) << step_dir << " against its tensors written by one rank";
}

}  // namespace dtrain::test

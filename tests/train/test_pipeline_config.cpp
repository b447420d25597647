// What parallel.pp and parallel.pipeline.* ask of a config, checked before any work starts: each
// refusal names its keys and values, each questionable choice is a warning with its cost, and an
// accepted config carries its schedule and split in TrainConfig::pipeline.
#include <gtest/gtest.h>

#include <filesystem>

#include "parallel/pipeline/stage_split.h"
#include "config_refusal.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/train_config.h"

using namespace dtrain;
using dtrain::test::BadInput;
using dtrain::test::contains;
using dtrain::test::refusal_of;
using dtrain::test::resolved;
using dtrain::test::run_process;
using dtrain::test::scratch_dir;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> warnings_of(const std::vector<std::string>& sets, int world) { return resolved(sets, world).warnings; }

// The demo model has 4 blocks, the tiny one 2; a micro-batch of 1 lets the accumulation steps be
// anything.
const std::vector<BadInput>& bad_inputs() {
  static const std::vector<BadInput> cases = {
      {{"model.preset=tiny", "parallel.pp=4"}, 4,
       "'parallel.pp' (4) is more than model.n_layer (2): every pipeline stage holds at least one block"},
      {{"parallel.pp=2", "parallel.pipeline.schedule=interleaved_1f1b", "parallel.pipeline.virtual_stages=3",
        "gradient_accumulation_steps=2", "train_micro_batch_size_per_gpu=1"}, 2,
       "'parallel.pp' (2) x 'parallel.pipeline.virtual_stages' (3) makes 6 chunks, more than model.n_layer (4): every chunk holds at "
       "least one block"},
      {{"parallel.pp=2", "parallel.pipeline.split=[1,1,2]"}, 2,
       "'parallel.pipeline.split' [1, 1, 2] gives 3 chunk(s), but parallel.pp 2 x parallel.pipeline.virtual_stages 1 makes 2: give one "
       "block count per chunk"},
      {{"parallel.pp=2", "parallel.pipeline.split=[1,2]"}, 2,
       "'parallel.pipeline.split' [1, 2] places 3 blocks, but model.n_layer is 4: a split places every block of the model exactly once"},
      {{"parallel.pp=2", "parallel.pipeline.split=[0,4]"}, 2,
       "'parallel.pipeline.split' [0, 4] gives chunk 0 0 blocks; every chunk holds at least one block"},
      {{"parallel.pp=2", "parallel.pipeline.split=[1.5,2.5]"}, 2,
       "'parallel.pipeline.split' must list whole numbers of blocks, one per chunk, got 1.5 in [1.5,2.5]"},
      {{"parallel.pp=2", "parallel.pipeline.split=even"}, 2,
       "'parallel.pipeline.split' must be null (the cost model splits the blocks), \"auto\" (timed at start-up) or a list of blocks "
       "per chunk, got \"even\""},
      {{"parallel.pp=2", "parallel.pipeline.schedule=1f1b", "parallel.pipeline.virtual_stages=2"}, 2,
       "'parallel.pipeline.virtual_stages' is 2, but parallel.pipeline.schedule 1f1b runs one chunk per pp rank: several virtual "
       "stages need interleaved_1f1b"},
      {{"parallel.pp=2", "parallel.pipeline.schedule=pipedream"}, 2,
       "'parallel.pipeline.schedule' must be one of gpipe, 1f1b, interleaved_1f1b, zero_bubble, got \"pipedream\""},
      {{"parallel.pp=2", "parallel.pipeline.schedule=interleaved_1f1b", "parallel.pipeline.virtual_stages=2",
        "gradient_accumulation_steps=3", "train_micro_batch_size_per_gpu=1"}, 2,
       "gradient_accumulation_steps (parallel.micro_batches) is 3, which 'parallel.pp' (2) does not divide: interleaved_1f1b runs the "
       "micro-batches in rounds of pp, as Megatron's interleaved schedule requires; give a multiple of 2"},
      {{"parallel.pp=2", "gradient_accumulation_steps=4", "parallel.micro_batches=8"}, 2,
       "'gradient_accumulation_steps' (4) and 'parallel.micro_batches' (8) are two names for the micro-batches of a step, and they "
       "differ; give one of them"},
      {{"parallel.pipeline_schedule=gpipe"}, 1,
       "'parallel.pipeline_schedule' is now 'parallel.pipeline.schedule' (gpipe, 1f1b, interleaved_1f1b, zero_bubble), got \"gpipe\"; "
       "rename the key"},
      {{"parallel.pp=2", "parallel.dp=2"}, 2,
       "the parallel dims (parallel.pp, parallel.dp, parallel.cp, parallel.tp) span pp 2 x dp_replicate 1 x dp_shard 2 x cp 1 x tp 1 "
       "= 4 ranks, but the world size is 2"},
      {{"parallel.pp=3"}, 4,
       "dp_shard (parallel.dp) is inferred from the world size 4, which the other dims (parallel.pp, parallel.cp, parallel.tp: pp 3 x "
       "dp_replicate 1 x cp 1 x tp 1 = 3) do not divide"},
  };
  return cases;
}

}  // namespace

TEST(PipelineConfig, EachInputAPipelineCannotRunIsRefusedNamingItsKeysAndValues) {
  for (const auto& bad : bad_inputs()) EXPECT_EQ(refusal_of(bad.sets, bad.world), "cfg.json: " + bad.error) << bad.sets.back();
}

TEST(PipelineConfig, FewerMicroBatchesThanStagesAreAWarningWithTheBubbleTheyCost) {
  for (const std::string schedule : {"1f1b", "gpipe"})
    EXPECT_EQ(warnings_of({"parallel.pp=4", "parallel.pipeline.schedule=" + schedule, "parallel.micro_batches=2",
                           "train_micro_batch_size_per_gpu=1"}, 4),
              std::vector<std::string>{"cfg.json: gradient_accumulation_steps (parallel.micro_batches) is 2, fewer than parallel.pp (4): "
                                       "the " + schedule + " pipeline idles 60% of each step ((p-1)/(m+p-1) = 3/5); 4 or more "
                                       "micro-batches per step keep every stage busy for longer"});
  EXPECT_TRUE(warnings_of({"parallel.pp=4", "parallel.micro_batches=4", "train_micro_batch_size_per_gpu=1"}, 4).empty());
  EXPECT_EQ(warnings_of({"parallel.pp=2", "parallel.pipeline.schedule=interleaved_1f1b", "parallel.micro_batches=2",
                         "train_micro_batch_size_per_gpu=1"}, 2),
            std::vector<std::string>{"cfg.json: parallel.pipeline.schedule interleaved_1f1b with parallel.pipeline.virtual_stages 1 is "
                                     "1f1b: set virtual_stages to 2 or more to interleave"});
  // The key earlier versions reserved, at the one value they took, as every earlier config.json holds it.
  EXPECT_EQ(warnings_of({"parallel.pipeline_schedule=1f1b"}, 1),
            std::vector<std::string>{"cfg.json: 'parallel.pipeline_schedule' is now 'parallel.pipeline.schedule'; its value \"1f1b\", the "
                                     "only one it took, is the new key's default, and the old key is ignored: remove it"});
}

TEST(PipelineConfig, AnAcceptedPipelineCarriesItsScheduleAndSplit) {
  // No pipeline: one chunk of every block.
  const TrainConfig plain = resolved({}, 1);
  EXPECT_EQ(plain.parallel.pp, 1);
  EXPECT_EQ(plain.pipeline.schedule, ScheduleKind::OneFOneB);
  EXPECT_EQ(plain.pipeline.split, std::vector<int>{4});
  // The cost model's split of GPT-2 124M, whose 50257-token head outweighs four blocks.
  const TrainConfig gpt2 = resolved({"model.preset=gpt2-124m", "parallel.pp=4", "parallel.micro_batches=8",
                                     "train_micro_batch_size_per_gpu=1"}, 8);
  EXPECT_EQ(gpt2.pipeline.split, (std::vector<int>{3, 4, 4, 1}));
  EXPECT_EQ(gpt2.pipeline.split, balance_split(model_layer_costs(gpt2.model, 1), 12, 4));
  EXPECT_FALSE(gpt2.pipeline.measure_split);
  // train_batch_size = micro × accumulation × dp: the micro-batches are the accumulation steps.
  EXPECT_EQ(gpt2.dp, 2);
  EXPECT_EQ(gpt2.accumulation, 8);
  EXPECT_EQ(gpt2.global_batch, 16);
  EXPECT_EQ(gpt2.json["gradient_accumulation_steps"], 8);
  EXPECT_EQ(gpt2.json["parallel"]["micro_batches"], 8);
  EXPECT_EQ(resolved({"parallel.micro_batches=3", "gradient_accumulation_steps=3", "train_micro_batch_size_per_gpu=2"}, 2).global_batch, 12);
  EXPECT_EQ(resolved({"parallel.micro_batches=3", "train_batch_size=24"}, 2).micro_batch, 4);

  const TrainConfig interleaved = resolved({"model.n_layer=8", "parallel.pp=2", "parallel.pipeline.schedule=interleaved_1f1b",
                                            "parallel.pipeline.virtual_stages=2", "parallel.pipeline.split=[1,3,3,1]",
                                            "gradient_accumulation_steps=4", "train_micro_batch_size_per_gpu=1"}, 2);
  EXPECT_EQ(interleaved.pipeline.schedule, ScheduleKind::Interleaved1F1B);
  EXPECT_EQ(interleaved.pipeline.virtual_stages, 2);
  EXPECT_EQ(interleaved.pipeline.split, (std::vector<int>{1, 3, 3, 1}));

  const TrainConfig measured = resolved({"parallel.pp=2", "parallel.pipeline.split=auto"}, 2);
  EXPECT_TRUE(measured.pipeline.measure_split);
  EXPECT_TRUE(measured.pipeline.split.empty());
  // Resolved, each reads back as itself.
  for (const TrainConfig* c : {&gpt2, &interleaved, &measured}) EXPECT_EQ(resolve_config(c->json, c->world_size, "config.json").json, c->json);
}

// `dtrain config check` prints the pipeline and its split, warns as the run would, and refuses what
// the run refuses; `dtrain run` refuses before launching a rank, leaving no run directory.
TEST(PipelineConfig, ConfigCheckShowsTheSplitAndRunRefusesBeforeLaunchingARank) {
  const auto checked = run_process({DTRAIN_BIN, "config", "check", "--world-size", "4", "--set", "model.preset=gpt2-124m", "--set",
                                    "parallel.pp=4", "--set", "parallel.micro_batches=2", "--set", "train_micro_batch_size_per_gpu=1"},
                                   60);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_TRUE(contains(checked.output, "layout     4 rank(s): pp 4 x dp 1")) << checked.output;
  EXPECT_TRUE(contains(checked.output, "pipeline   1f1b, pp 4 x 1 virtual stage(s), 2 micro-batches per step; pipeline split (cost "
                                       "model): chunks of 3, 4, 4, 1 blocks; costs 0.18, 0.24, 0.24, 0.33 of the total"))
      << checked.output;
  EXPECT_TRUE(contains(checked.output, "warning: demo config with --set: gradient_accumulation_steps (parallel.micro_batches) is 2, "
                                       "fewer than parallel.pp (4): the 1f1b pipeline idles 60% of each step"))
      << checked.output;

  const std::string dir = scratch_dir("pipeline_bad_inputs");
  int n = 0;
  for (const auto& bad : {bad_inputs().front(), bad_inputs().back()}) {
    std::vector<std::string> check = {DTRAIN_BIN, "config", "check", "--world-size", std::to_string(bad.world)};
    const std::string run_dir = dir + "/run-" + std::to_string(n++);
    std::vector<std::string> run = {DTRAIN_BIN, "run", "--no-sample", "--nproc-per-node", std::to_string(bad.world), "--set",
                                    "train.run_dir=" + run_dir};
    for (const auto& s : bad.sets) {
      check.insert(check.end(), {"--set", s});
      run.insert(run.end(), {"--set", s});
    }
    const auto refused = run_process(check, 60);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_TRUE(contains(refused.output, bad.error)) << refused.output;
    const auto ran = run_process(run, 60, {"OMP_NUM_THREADS=1"});
    EXPECT_NE(ran.exit_code, 0) << ran.output;
    EXPECT_TRUE(contains(ran.output, bad.error)) << ran.output;
    EXPECT_FALSE(contains(ran.output, "dtrain launch")) << "a rank was launched:\n" << ran.output;
    EXPECT_FALSE(fs::exists(run_dir)) << run_dir;
  }
}

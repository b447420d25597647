// Sharded state under a pipeline: ZeRO stage 3 gathers each stage's units once per step, however
// many micro-batches the schedule runs through them, and frees them once their gradients are taken
// (docs/decisions.md: stage 3 under a pipeline), as the unit trace of wall_clock_breakdown (rank 0,
// the first stage) shows; and the index describes every tensor as the whole layout cuts it, the
// tensors of stages other than the writing rank's included.
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

// pp 2 x tp 2: rank 0 (stage 0) writes the index, which says how tp cuts stage 1's tensors too.
TEST(PipelineSharding, TheIndexCutsEveryStagesTensorsOverTp) {
  const TrainingRun run = train(scratch_dir("pp_tp_index"), 4,
                                {"model.n_layer=4", "parallel.pp=2", "parallel.tp=2", "train_batch_size=8", "train_micro_batch_size_per_gpu=2",
                                 "train.steps=1", "checkpoint.every_steps=1"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const nlohmann::json index = index_of(ckpt(run.dir, 1));
  auto placements = [](int stage, const std::string& tp) {
    nlohmann::json p = nlohmann::json::array({{{"mesh_dim", "pp"}, {"ranks", 2}, {"placement", "stages"}, {"stages", {stage}}}});
    p.push_back(tp == "replicate" ? nlohmann::json{{"mesh_dim", "tp"}, {"ranks", 2}, {"placement", "replicate"}}
                                  : nlohmann::json{{"mesh_dim", "tp"}, {"ranks", 2}, {"placement", "shard"}, {"dim", std::stoi(tp)}});
    return p;
  };
  for (int stage : {0, 1}) {
    const std::string block = "model/blocks." + std::to_string(2 * stage + 1);
    EXPECT_EQ(index["tensors"][block + ".down_proj.weight"]["placements"], placements(stage, "1")) << block;
    EXPECT_EQ(index["tensors"][block + ".up_proj.weight"]["placements"], placements(stage, "0")) << block;
    EXPECT_EQ(index["tensors"][block + ".down_proj.bias"]["placements"], placements(stage, "replicate")) << block;
  }
}

}  // namespace
}  // namespace dtrain::test

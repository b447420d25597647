// The per-module parallel plan (parallel.modules) on the tiny GPT-2 at dp 2, shaped as the seed's
// vision-language plan (frozen encoder, connector unsharded, LLM sharded): the token table frozen,
// block 0 kept whole, everything else sharded at ZeRO stage 1, 2 or 3. Against one rank with the same
// freeze: each step's loss and gradient norm and the final parameters within the fp32 bounds of
// another summation order (equivalence.h; a missing 1/dp on the part kept whole doubles its share of
// the norm, far outside them). The frozen table ends bit for bit as it began, has no optimizer state
// in the checkpoint, and no collective carries it: every element the ranks send is accounted for by
// the trainable parameters (trace.json records each op's shape). A checkpoint of the plan resumes
// under plain data parallelism and back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

#include "collective_trace.h"
#include "layout_legs.h"
#include "model/parameter_shapes.h"
#include "model/transformer.h"

namespace dtrain::test {
namespace {

using nlohmann::json;

// 4 steps (kBase) of 8 samples, 4 on each of 2 ranks: one backward per step, so ZeRO's reductions
// and stage 3's last-block gathers run once per step.
const Sets kJob = {"train_batch_size=8", "train_micro_batch_size_per_gpu=4"};
const Sets kOneRank = {"train_batch_size=8", "train_micro_batch_size_per_gpu=8"};
const Sets kFrozenTable = {"train.freeze=[\"wte.*\"]"};

// The token table frozen, block 0 kept whole, the rest at `stage`: '*' matches block 0 too, and the
// narrower 'blocks.0.*' decides its stage.
Sets plan_at(int stage) {
  return {"parallel.modules={\"wte.*\": {\"freeze\": true}, \"blocks.0.*\": {\"zero_stage\": 0}, \"*\": {\"zero_stage\": " +
          std::to_string(stage) + "}}"};
}

// The tiny model's parameter counts: every one, those frozen (wte) and those kept whole (block 0).
PlanCounts counts() {
  PlanCounts c;
  for (const ParameterShape& s : parameter_shapes(model_preset("tiny"))) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    c.total += n;
    if (s.name == "wte.weight") c.frozen += n;
    if (s.name.rfind("blocks.0.", 0) == 0) c.whole += n;
  }
  return c;
}

// The token table as it was initialised, bit for bit; no optimizer state for it in the checkpoint;
// block 0's parameters and state saved whole (Replicate over dp_shard, one chunk), the others' flat
// shards.
void expect_frozen_table_untouched(const TrainingRun& run, int step) {
  Transformer initial(model_preset("tiny"), 7);  // train.seed in kBase
  at::Tensor table;
  for (const auto& item : initial->named_parameters())
    if (item.key() == "wte.weight") table = item.value();
  const auto trained = final_parameters(run, step);
  EXPECT_TRUE(torch::equal(trained.at("wte.weight"), table)) << "wte.weight changed although frozen";
  const json tensors = index_of(ckpt(run.dir, step)).at("tensors");
  auto over_dp = [](const json& tensor) {
    for (const json& p : tensor.at("placements"))
      if (p.at("mesh_dim") == "dp_shard") return p.at("placement").get<std::string>();
    return std::string("(none)");
  };
  int block0_state = 0;
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const std::string& key = it.key();
    if (detail::starts_with(key, "optimizer/")) EXPECT_EQ(key.find("wte.weight"), std::string::npos) << key << ": state for a frozen parameter";
    if (key.find("/blocks.0.") != std::string::npos) {
      EXPECT_EQ(over_dp(it.value()), "replicate") << key;
      EXPECT_EQ(it.value().at("chunks").size(), 1u) << key;
      block0_state += detail::starts_with(key, "optimizer/");
    } else if (detail::starts_with(key, "optimizer/exp_avg/blocks.1.")) {
      EXPECT_EQ(over_dp(it.value()), "flat_shard") << key;
    }
  }
  EXPECT_EQ(block0_state, 2 * 16) << "block 0's two moments";
}

}  // namespace

// Stages 1, 2 and 3 around block 0 kept whole, each against one rank with the table frozen by
// train.freeze. Stage 3 is traced: what its collectives carried accounts for every element sent.
TEST(ModulePlan, FrozenTableBlockKeptWholeRestShardedTrainLikeOneRank) {
  const TrainingRun one_rank = train(scratch_dir("module_plan_one_rank"), 1, kOneRank + kFrozenTable);
  ASSERT_EQ(one_rank.result.exit_code, 0) << one_rank.result.output;
  const PlanCounts c = counts();
  for (const int stage : {1, 2, 3}) {
    SCOPED_TRACE("ZeRO stage " + std::to_string(stage));
    const Sets traced = stage == 3 ? Sets{"train.trace=true"} : Sets{};
    const TrainingRun run = train(scratch_dir("module_plan_stage" + std::to_string(stage)), 2, kJob + plan_at(stage) + traced);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    expect_same_training(run, one_rank, 4);
    const std::string& out = run.result.output;
    EXPECT_TRUE(contains(out, "parameters: " + std::to_string(c.total) + " total | " + std::to_string(c.total - c.frozen) + " trainable | " +
                                  std::to_string(c.frozen) + " frozen")) << out;
    EXPECT_TRUE(contains(out, "parallel.modules 'blocks.0.*': zero_stage 0: 16 tensor(s), " + std::to_string(c.whole) +
                                  " parameters kept whole on every rank")) << out;
    EXPECT_TRUE(contains(out, "parallel.modules 'wte.*': freeze true: 1 tensor(s), " + std::to_string(c.frozen) + " parameters frozen")) << out;
    EXPECT_TRUE(contains(out, "ZeRO stage " + std::to_string(stage) + ": ")) << out;
    EXPECT_TRUE(contains(out, "(" + std::to_string(c.whole) + " of them kept whole on every rank by parallel.modules)")) << out;
    expect_frozen_table_untouched(run, 4);
    if (stage == 3) expect_only_trainable_parameters_communicated(run.dir, c, 4, 2);
  }
}

// Plan (stage 3) -> plain data parallelism -> plan (stage 2), each leg resuming the last one's
// checkpoint, against one rank uninterrupted: block 0's state, saved whole, loads into ZeRO's
// shards and back, and the table stays frozen whichever key freezes it.
TEST(ModulePlan, ACheckpointOfThePlanResumesUnderPlainDataParallelismAndBack) {
  const Sets job = kLayoutJob + Sets{"model.preset=tiny"};
  const TrainingRun straight = train(scratch_dir("module_plan_resume_straight"), 1, job + kFrozenTable);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  const TrainingRun legs = train_in_legs("module_plan_resume", job,
                                         {{2, plan_at(3), 2, "parallel.modules 'blocks.0.*': zero_stage 0"},
                                          {2, kFrozenTable, 4, "batch: 8 = micro 2 x accumulation 2 x dp 2"},
                                          {2, plan_at(2), 6, "ZeRO stage 2: optimizer state and gradients sharded over 2"}});
  expect_same_training(legs, straight, 6);
  expect_frozen_table_untouched(legs, 6);
}

}  // namespace dtrain::test

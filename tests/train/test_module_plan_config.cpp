// parallel.modules resolved in-process on the tiny GPT-2's names (wte.weight, wpe.weight,
// blocks.N.*, ln_f.*): which glob decides each parameter's settings, the run's one ZeRO stage, and
// every mistake refused by name. tests/train/test_module_plan.cpp trains with such plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "config_refusal.h"
#include "model/parameter_shapes.h"
#include "training_run.h"

namespace dtrain::test {
namespace {

const Sets kTiny = {"model.preset=tiny"};

std::set<std::string> names_starting(const std::string& prefix) {
  std::set<std::string> out;
  for (const auto& name : parameter_names(model_preset("tiny")))
    if (name.rfind(prefix, 0) == 0) out.insert(name);
  return out;
}

TEST(ModulePlan, TheNarrowestGlobDecidesAndTheRunTakesTheModulesStage) {
  // '*' matches every parameter, 'blocks.0.*' a subset of them: the block is kept whole.
  TrainConfig c = resolved(kTiny + Sets{"parallel.modules={\"*\": {\"zero_stage\": 3}, \"blocks.0.*\": {\"zero_stage\": 0}}"}, 2);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.modules.kept_whole, names_starting("blocks.0."));
  EXPECT_TRUE(c.modules.frozen.empty());
  // zero_optimization.stage 0 with the blocks at stage 2: the run is at stage 2, the rest kept whole.
  c = resolved(kTiny + Sets{"parallel.modules={\"blocks.*\": {\"zero_stage\": 2}}"}, 2);
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.modules.kept_whole, (std::set<std::string>{"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}));
  // Every trainable parameter at stage 0: plain data parallelism, nothing to keep whole apart.
  c = resolved(kTiny + Sets{"zero_optimization.stage=3", "parallel.modules={\"*\": {\"zero_stage\": 0}}"}, 2);
  EXPECT_EQ(c.zero_stage, 0);
  EXPECT_TRUE(c.modules.kept_whole.empty());
  // A frozen parameter takes no stage; train.freeze and a module may freeze the same one.
  c = resolved(kTiny + Sets{"train.freeze=[\"wte.*\"]", "parallel.modules={\"wte.*\": {\"freeze\": true}, \"wpe.*\": {\"freeze\": true}, "
                                                                       "\"*\": {\"zero_stage\": 3}, \"ln_f.*\": {\"zero_stage\": 0}}"},
               2);
  EXPECT_EQ(c.modules.frozen, (std::set<std::string>{"wte.weight", "wpe.weight"}));
  EXPECT_EQ(c.modules.kept_whole, names_starting("ln_f."));
  const auto star = std::find_if(c.modules.modules.begin(), c.modules.modules.end(), [](const auto& m) { return m.glob == "*"; });
  ASSERT_NE(star, c.modules.modules.end());
  EXPECT_EQ(star->matched.size(), parameter_names(model_preset("tiny")).size());
  EXPECT_EQ(star->stages.size(), star->matched.size() - 4);  // not the two frozen, not ln_f's two
  // Keys that apply to stage 3 only accept a stage 3 the modules set.
  EXPECT_EQ(refusal_of(kTiny + Sets{"parallel.modules={\"blocks.*\": {\"zero_stage\": 3}}", "parallel.fsdp.reshard_after_forward=false"}, 2),
            "(no error)");
}

TEST(ModulePlan, MistakesAreRefusedNamingTheGlobAndTheSetting) {
  const std::string at = "cfg.json: 'parallel.modules' ";
  const std::vector<BadInput> cases = {
      {{"parallel.modules={\"blocks.0.*\": {\"zero_stag\": 0}}"}, 1,
       "glob 'blocks.0.*': unknown setting 'zero_stag' (did you mean 'zero_stage'?); a module takes freeze and zero_stage"},
      {{"parallel.modules={\"wte.*\": {\"frozen\": true}}"}, 1,
       "glob 'wte.*': unknown setting 'frozen' (did you mean 'freeze'?); a module takes freeze and zero_stage"},
      {{"parallel.modules={\"vision.*\": {\"freeze\": true}}"}, 1,
       "glob 'vision.*' matches no parameter (names look like wte.weight, blocks.1.ln1.weight, ln_f.bias)"},
      {{"parallel.modules={\"blocks.0.*\": {\"zero_stage\": 4}}"}, 1, "glob 'blocks.0.*': 'zero_stage' must be 0, 1, 2 or 3, got 4"},
      {{"parallel.modules={\"blocks.0.*\": {\"zero_stage\": \"3\"}}"}, 1, "glob 'blocks.0.*': 'zero_stage' must be 0, 1, 2 or 3, got \"3\""},
      {{"parallel.modules={\"blocks.0.*\": {\"zero_stage\": 1.5}}"}, 1, "glob 'blocks.0.*': 'zero_stage' must be 0, 1, 2 or 3, got 1.5"},
      {{"parallel.modules={\"wte.*\": {\"freeze\": \"yes\"}}"}, 1, "glob 'wte.*': 'freeze' must be true or false, got \"yes\""},
      {{"parallel.modules={\"wte.*\": true}"}, 1,
       "glob 'wte.*' must map to an object of settings such as {\"freeze\": true} or {\"zero_stage\": 0}, got true"},
      {{"parallel.modules={\"wte.*\": {}}"}, 1, "glob 'wte.*' sets nothing; a module takes freeze and zero_stage"},
      {{"parallel.modules={\"wte.*\": {\"freeze\": true, \"zero_stage\": 3}}"}, 1,
       "glob 'wte.*' sets freeze true and zero_stage 3: a frozen parameter is not sharded (it stays whole on every rank, with no "
       "gradient and no optimizer state); drop one"},
      {{"zero_optimization.stage=3", "parallel.modules={\"blocks.0.*\": {\"zero_stage\": 2}}"}, 1,
       "gives the trainable parameters two ZeRO stages: 'blocks.0.ln1.weight' 2 (glob 'blocks.0.*') and 'wte.weight' 3 "
       "(zero_optimization.stage); a run shards at one stage and keeps whole (zero_stage 0) what it does not shard, so give every "
       "sharded module the same stage"},
      {{"parallel.modules={\"blocks.0.*\": {\"zero_stage\": 0}, \"*.weight\": {\"zero_stage\": 3}}"}, 1,
       "globs '*.weight' and 'blocks.0.*' both match 'blocks.0.ln1.weight' and set zero_stage to 3 and 0, and neither is narrower "
       "(each matches parameters the other does not); narrow one of them"},
      {{"train.freeze=[\"wpe.*\"]", "parallel.modules={\"wpe.weight\": {\"freeze\": false}}"}, 1,
       "glob 'wpe.weight' sets freeze false for 'wpe.weight', which train.freeze's 'wpe.*' freezes; drop one of them"},
  };
  for (const BadInput& c : cases) EXPECT_EQ(refusal_of(kTiny + c.sets, c.world), at + c.error) << c.sets.back();
  EXPECT_EQ(refusal_of(kTiny + Sets{"parallel.modules=[\"wte.*\"]"}, 1), "cfg.json: 'parallel.modules' must be a JSON object, got [\"wte.*\"]");
}

// `dtrain config check` refuses them as a run would, before any rank starts.
TEST(ModulePlan, ConfigCheckRefusesAGlobThatMatchesNothing) {
  const ProcessResult r = run_process({DTRAIN_BIN, "config", "check", "--set", "model.preset=tiny", "--set",
                                       "parallel.modules={\"encoder.*\": {\"zero_stage\": 3}}"},
                                      60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "'parallel.modules' glob 'encoder.*' matches no parameter")) << r.output;
}

}  // namespace
}  // namespace dtrain::test

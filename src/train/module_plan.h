// parallel.modules: a parallel plan per module. Globs over parameter names (fnmatch, as train.freeze
// takes them: "vision.*", "connector.*", "llm.blocks.*") map to settings: {"freeze": bool} and
// {"zero_stage": 0..3}. A parameter takes each setting from the narrowest glob that matches it and
// sets it: glob A is narrower than glob B when the parameters A matches are a strict subset of those
// B matches (in this model). Two globs that both match a parameter, set the same setting to different
// values and neither of which is narrower are refused, naming both: JSON objects keep no order, so
// "the last listed" cannot decide. A parameter no glob gives a zero_stage takes
// zero_optimization.stage.
//
// One run shards at one ZeRO stage: the trainable parameters' nonzero stages must agree (that stage
// is the run's, whatever zero_optimization.stage says), and those at stage 0 are kept whole on every
// rank inside it (docs/decisions.md, "Per-module parallel plan").
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/parameter_shapes.h"

namespace dtrain {

struct ModulePlan {
  struct Module {
    std::string glob;
    std::optional<bool> freeze;
    std::optional<int> zero_stage;
    std::vector<std::string> matched;  // every parameter the glob matches, in the model's order
    // The parameters whose freeze or zero_stage this glob decides (it is the narrowest that sets it).
    std::vector<std::string> freezes, stages;
  };
  std::vector<Module> modules;  // by glob, in the JSON object's (sorted) order
  int zero_stage = 0;           // the run's: the stage of every trainable parameter not kept whole
  std::set<std::string> frozen;      // what the modules freeze (train.freeze's own globs aside)
  std::set<std::string> kept_whole;  // trainable parameters at zero_stage 0 in a run at a nonzero stage

  bool freezes(const std::string& name) const { return frozen.count(name) > 0; }
  bool keeps_whole(const std::string& name) const { return kept_whole.count(name) > 0; }
};

// Resolves parallel.modules (`modules`, a JSON object) for a model whose parameters are `names` (its
// parameter_names), in a run whose zero_optimization.stage is `run_stage` and whose train.freeze globs
// are `freeze_globs`. Throws ConfigError, after "`origin`: 'parallel.modules'", naming the glob and the
// setting at fault: an entry that is no object or sets nothing, an unknown setting (with the nearest
// known one), a value of the wrong type or range, freeze true beside a zero_stage, a glob that matches
// no parameter, two globs that disagree about a parameter with neither narrower, freeze false for a
// parameter train.freeze freezes, and trainable parameters at two different nonzero stages.
ModulePlan resolve_module_plan(const nlohmann::json& modules, const std::vector<std::string>& names, int run_stage,
                               const std::vector<std::string>& freeze_globs, const std::string& origin);

// For the start-up summary: the whole model's parameter counts (`shapes`: its parameter_shapes), total,
// trainable and `frozen` (by train.freeze or the plan), as the seed prints them; then one line per glob
// saying what its parameters got, counted in tensors and elements, with the run's sharding over
// `shard_ranks` ranks.
std::vector<std::string> describe_module_plan(const ModulePlan& plan, const std::vector<ParameterShape>& shapes,
                                              const std::function<bool(const std::string&)>& frozen, int shard_ranks);

}  // namespace dtrain

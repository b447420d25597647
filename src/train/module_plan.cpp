#include "train/module_plan.h"

#include <algorithm>
#include <map>

#include "common/number_text.h"
#include "common/printable.h"
#include "common/printable_json.h"
#include "train/config_schema.h"
#include "train/freeze_globs.h"
#include "train/train_config.h"

namespace dtrain {

namespace {

using json = nlohmann::json;
using Module = ModulePlan::Module;

const std::vector<std::string> kSettings = {"freeze", "zero_stage"};

class Refusal {
 public:
  explicit Refusal(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void operator()(const std::string& msg) const { throw ConfigError(origin_ + ": 'parallel.modules' " + msg); }

 private:
  std::string origin_;
};

std::string named(const std::string& s) { return "'" + printable(s) + "'"; }

Module read_module(const std::string& glob, const json& settings, const Refusal& refuse) {
  const std::string at = "glob " + named(glob);
  if (!settings.is_object())
    refuse(at + " must map to an object of settings such as {\"freeze\": true} or {\"zero_stage\": 0}, got " + printable_json(settings));
  if (settings.empty()) refuse(at + " sets nothing; a module takes freeze and zero_stage");
  Module m;
  m.glob = glob;
  for (auto it = settings.begin(); it != settings.end(); ++it) {
    const json& v = it.value();
    if (it.key() == "freeze") {
      if (!v.is_boolean()) refuse(at + ": 'freeze' must be true or false, got " + printable_json(v));
      m.freeze = v.get<bool>();
    } else if (it.key() == "zero_stage") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 3)
        refuse(at + ": 'zero_stage' must be 0, 1, 2 or 3, got " + printable_json(v));
      m.zero_stage = int(v.get<int64_t>());
    } else {
      refuse(at + ": unknown setting " + named(it.key()) + " (did you mean '" + nearest_of(it.key(), kSettings) +
             "'?); a module takes freeze and zero_stage");
    }
  }
  if (m.freeze.value_or(false) && m.zero_stage)
    refuse(at + " sets freeze true and zero_stage " + std::to_string(*m.zero_stage) +
           ": a frozen parameter is not sharded (it stays whole on every rank, with no gradient and no optimizer state); drop one");
  return m;
}

// A few of the model's names, for a glob that matches none of them.
std::string names_like(const std::vector<std::string>& names) {
  std::vector<std::string> some = {names.front(), names[names.size() / 2], names.back()};
  some.erase(std::unique(some.begin(), some.end()), some.end());
  std::string out;
  for (const auto& n : some) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Which modules set a setting (`value` of a module: the setting as an int, or nullopt) and decide
// it for each parameter: the narrowest of those that match it.
class Precedence {
 public:
  Precedence(const std::vector<Module>& modules, const std::vector<std::string>& names, const Refusal& refuse)
      : modules_(modules), refuse_(refuse) {
    for (const Module& m : modules) {
      std::vector<bool> hit(names.size());
      for (size_t k = 0; k < names.size(); ++k) hit[k] = freeze_glob_matches(m.glob, names[k]);
      matches_.push_back(std::move(hit));
    }
  }

  bool matches(size_t module, size_t name) const { return matches_[module][name]; }

  // The module deciding `setting` of parameter `name` (index `k`), or -1 when none sets it.
  template <typename Value>
  int decide(size_t k, const std::string& name, const std::string& setting, Value value) const {
    std::vector<size_t> setters;
    for (size_t i = 0; i < modules_.size(); ++i)
      if (matches_[i][k] && value(modules_[i])) setters.push_back(i);
    std::vector<size_t> narrowest;
    for (size_t i : setters)
      if (std::none_of(setters.begin(), setters.end(), [&](size_t j) { return narrower(j, i); })) narrowest.push_back(i);
    if (narrowest.empty()) return -1;
    for (size_t i : narrowest) {
      const size_t first = narrowest.front();
      if (*value(modules_[i]) == *value(modules_[first])) continue;
      refuse_("globs " + named(modules_[first].glob) + " and " + named(modules_[i].glob) + " both match " + named(name) + " and set " +
              setting + " to " + std::to_string(*value(modules_[first])) + " and " + std::to_string(*value(modules_[i])) +
              ", and neither is narrower (each matches parameters the other does not); narrow one of them");
    }
    return int(narrowest.front());
  }

 private:
  // Whether module a's parameters are a strict subset of module b's.
  bool narrower(size_t a, size_t b) const {
    const auto &x = matches_[a], &y = matches_[b];
    bool smaller = false;
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k] && !y[k]) return false;
      if (y[k] && !x[k]) smaller = true;
    }
    return smaller;
  }

  const std::vector<Module>& modules_;
  const Refusal& refuse_;
  std::vector<std::vector<bool>> matches_;  // per module, per parameter
};

std::optional<int> freeze_value(const Module& m) { return m.freeze ? std::optional<int>(int(*m.freeze)) : std::nullopt; }
std::optional<int> stage_value(const Module& m) { return m.zero_stage; }

}  // namespace

ModulePlan resolve_module_plan(const json& modules, const std::vector<std::string>& names, int run_stage,
                               const std::vector<std::string>& freeze_globs, const std::string& origin) {
  const Refusal refuse(origin);
  ModulePlan plan;
  plan.zero_stage = run_stage;
  if (!modules.is_object()) refuse("must be a JSON object of parameter-name globs, got " + printable_json(modules));
  if (modules.empty() || names.empty()) return plan;
  for (auto it = modules.begin(); it != modules.end(); ++it) plan.modules.push_back(read_module(it.key(), it.value(), refuse));
  const Precedence precedence(plan.modules, names, refuse);
  for (size_t i = 0; i < plan.modules.size(); ++i) {
    for (size_t k = 0; k < names.size(); ++k)
      if (precedence.matches(i, k)) plan.modules[i].matched.push_back(names[k]);
    if (plan.modules[i].matched.empty())
      refuse("glob " + named(plan.modules[i].glob) + " matches no parameter (names look like " + names_like(names) + ")");
  }
  // Per nonzero stage, the first trainable parameter at it and where its stage comes from.
  std::map<int, std::pair<std::string, std::string>> stages;
  std::vector<std::string> at_zero;
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string& name = names[k];
    const auto frozen_by = std::find_if(freeze_globs.begin(), freeze_globs.end(), [&](const auto& g) { return freeze_glob_matches(g, name); });
    const int freezer = precedence.decide(k, name, "freeze", freeze_value);
    if (freezer >= 0) {
      Module& m = plan.modules[size_t(freezer)];
      m.freezes.push_back(name);
      if (*m.freeze) plan.frozen.insert(name);
      else if (frozen_by != freeze_globs.end())
        refuse("glob " + named(m.glob) + " sets freeze false for " + named(name) + ", which train.freeze's " + named(*frozen_by) +
               " freezes; drop one of them");
    }
    if (plan.frozen.count(name) || frozen_by != freeze_globs.end()) continue;
    const int stager = precedence.decide(k, name, "zero_stage", stage_value);
    if (stager >= 0) plan.modules[size_t(stager)].stages.push_back(name);
    const int stage = stager >= 0 ? *plan.modules[size_t(stager)].zero_stage : run_stage;
    const std::string from = stager >= 0 ? "glob " + named(plan.modules[size_t(stager)].glob) : "zero_optimization.stage";
    if (stage == 0) at_zero.push_back(name);
    else stages.emplace(stage, std::make_pair(name, from));
  }
  if (stages.size() > 1) {
    const auto& [a, first] = *stages.begin();
    const auto& [b, second] = *std::next(stages.begin());
    refuse("gives the trainable parameters two ZeRO stages: " + named(first.first) + " " + std::to_string(a) + " (" + first.second +
           ") and " + named(second.first) + " " + std::to_string(b) + " (" + second.second +
           "); a run shards at one stage and keeps whole (zero_stage 0) what it does not shard, so give every sharded module the same stage");
  }
  plan.zero_stage = stages.empty() ? 0 : stages.begin()->first;
  if (plan.zero_stage > 0) plan.kept_whole.insert(at_zero.begin(), at_zero.end());
  return plan;
}

std::vector<std::string> describe_module_plan(const ModulePlan& plan, const std::vector<ParameterShape>& shapes,
                                              const std::function<bool(const std::string&)>& frozen, int shard_ranks) {
  std::map<std::string, int64_t> numel;
  int64_t total = 0, frozen_numel = 0;
  for (const ParameterShape& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    numel[s.name] = n;
    total += n;
    if (frozen(s.name)) frozen_numel += n;
  }
  auto counted = [&](const std::vector<std::string>& names) {
    int64_t elements = 0;
    for (const auto& n : names) elements += numel.at(n);
    return std::to_string(names.size()) + " tensor(s), " + std::to_string(elements) + " parameters";
  };
  std::vector<std::string> lines = {"parameters: " + std::to_string(total) + " total | " + std::to_string(total - frozen_numel) +
                                    " trainable | " + std::to_string(frozen_numel) + " frozen (" +
                                    fixed(100.0 * double(total - frozen_numel) / double(std::max<int64_t>(total, 1)), 1) + "% trainable)"};
  for (const Module& m : plan.modules) {
    std::vector<std::string> parts;
    if (m.freeze)
      parts.push_back("freeze " + std::string(*m.freeze ? "true" : "false") + ": " + counted(m.freezes) +
                      (*m.freeze ? " frozen (no gradient, no optimizer state, not communicated)" : " trained"));
    if (m.zero_stage) {
      const int s = *m.zero_stage;
      parts.push_back("zero_stage " + std::to_string(s) + ": " + counted(m.stages) +
                      (s > 0 ? " sharded by ZeRO stage " + std::to_string(s) + " over " + std::to_string(shard_ranks) + " rank(s)"
                       : plan.zero_stage > 0 ? " kept whole on every rank (no gather, gradients averaged by all-reduce, optimizer state whole)"
                                             : " replicated, as the whole run is"));
    }
    std::string line = "parallel.modules " + named(m.glob) + ": ";
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
    const size_t decided = std::max(m.freeze ? m.freezes.size() : 0, m.zero_stage ? m.stages.size() : 0);
    if (decided < m.matched.size())
      line += " (" + std::to_string(m.matched.size() - decided) + " more it matches follow a narrower glob or are frozen)";
    lines.push_back(line);
  }
  return lines;
}

}  // namespace dtrain

// Configs resolved in-process, for the tests of what the config rules refuse or warn about: a job
// given as `--set` overrides on the defaults, for a world of `world` ranks, as file "cfg.json".
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "train/train_config.h"

namespace dtrain::test {

inline TrainConfig resolved(const std::vector<std::string>& sets, int world) {
  nlohmann::json user = nlohmann::json::object();
  apply_overrides(user, sets);
  return resolve_config(user, world, "cfg.json");
}

// The ConfigError resolving it gives, or "(no error)".
inline std::string refusal_of(const std::vector<std::string>& sets, int world) {
  try {
    resolved(sets, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// A bad input beside the error it must give.
struct BadInput {
  std::vector<std::string> sets;
  int world;
  std::string error;  // after "cfg.json: "
};

}  // namespace dtrain::test

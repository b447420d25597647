// Every config key dtrain knows, with its default: DeepSpeed's top-level keys with their meaning,
// and dtrain's own sections (docs/config.md lists them all). A few subtrees
// are free-form because their keys depend on a type (optimizer.params, scheduler.params), checked
// where that type is built, or are names of the model's parameters (parallel.modules' globs).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace dtrain {

// The full default config.
const nlohmann::json& config_defaults();
// Whether the subtree at this dotted path takes any keys.
bool is_free_form(const std::string& dotted_path);
// The known dotted key nearest to `key` (edit distance), or "" when none is close.
std::string nearest_known_key(const std::string& key);
// The one of `candidates` nearest to `word` by edit distance, however far (the first of equals); ""
// when there are none. For the few names a free-form section takes.
std::string nearest_of(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dtrain

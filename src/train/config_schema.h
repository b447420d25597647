// Every config key dtrain knows, with its default: DeepSpeed's top-level keys with their meaning,
// and dtrain's own sections (docs/config.md lists them all). A few subtrees
// are free-form because their keys depend on a type (optimizer.params, scheduler.params), checked
// where that type is built.
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

}  // namespace dtrain

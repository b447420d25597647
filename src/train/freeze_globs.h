// train.freeze: globs (fnmatch) over parameter names; the parameters they match train not at all.
// A glob that matches nothing is a mistake (a typo, another model's names), refused by name.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

bool freeze_glob_matches(const std::string& glob, const std::string& parameter_name);

// Throws ConfigError naming the first of `globs` that matches none of `parameter_names`.
void require_freeze_globs_match(const std::vector<std::string>& globs, const std::vector<std::string>& parameter_names);

}  // namespace dtrain

#include "train/freeze_globs.h"

#include <fnmatch.h>

#include <algorithm>

#include "common/printable.h"
#include "train/train_config.h"

namespace dtrain {

bool freeze_glob_matches(const std::string& glob, const std::string& parameter_name) {
  return ::fnmatch(glob.c_str(), parameter_name.c_str(), 0) == 0;
}

void require_freeze_globs_match(const std::vector<std::string>& globs, const std::vector<std::string>& parameter_names) {
  for (const auto& glob : globs)
    if (std::none_of(parameter_names.begin(), parameter_names.end(), [&](const std::string& name) { return freeze_glob_matches(glob, name); }))
      throw ConfigError("train.freeze: '" + printable(glob) + "' matches no parameter (names look like blocks.0.q_proj.weight, wte.weight)");
}

}  // namespace dtrain

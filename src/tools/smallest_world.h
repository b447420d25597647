// A config resolved for the smallest world that holds its layout: pp × cp × tp × parallel.dp ranks,
// a dp of "auto" taken as 1. For the commands that read a config without running it (pipeline show,
// estimate) when no world size is given.
#pragma once
#include <string>
#include <vector>

#include "train/train_config.h"

namespace dtrain {

// The config at `path` with `sets` written over its keys as --set writes them, resolved as `dtrain
// run` resolves it. `origin` names it in errors. Throws ConfigError naming the file and the key.
TrainConfig resolve_at_smallest_world(const std::string& path, const std::vector<std::string>& sets, const std::string& origin);

}  // namespace dtrain

// What the parallelisms and offloads refuse, turned into the config's errors: an input they cannot
// take (std::invalid_argument) is the config's fault, named by its key where one is known.
#pragma once
#include <stdexcept>
#include <string>

#include "train/train_config.h"

namespace dtrain {

// Makes what offloads to NVMe under the offload section `key`; a path it cannot use
// (std::invalid_argument) is named by the key.
template <typename Make>
void offload_to_nvme(const std::string& key, Make make) {
  try {
    make();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(key + ".nvme_path: " + e.what());
  }
}

// What a model-parallel transformation returns; the input it cannot split (std::invalid_argument) is the config's fault.
template <typename Apply>
auto as_config_error(Apply apply) {
  try {
    return apply();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

}  // namespace dtrain

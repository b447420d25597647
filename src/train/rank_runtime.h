// How a rank's process computes, set once before anything is built: its thread pool, deterministic
// kernels when train.deterministic asks, and how it keeps host memory (train/host_memory.h).
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"
#include "train/train_config.h"

namespace dtrain {

// Appends what was set to `setup_lines`, for the run's log.
void configure_rank_runtime(const TrainConfig& config, World& world, std::vector<std::string>& setup_lines);

}  // namespace dtrain

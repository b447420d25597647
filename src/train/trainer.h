// One rank's training job: builds the world, data, model and data parallelism from a resolved
// TrainConfig, resumes if asked, runs the loop (gradient accumulation, overlapped all-reduce,
// stability guard, clipping, optimizer and schedule), evaluates, logs, and checkpoints.
#pragma once
#include <memory>

#include "comm/world.h"
#include "train/train_config.h"

namespace dtrain {

// Runs training on this rank; returns the process exit code.
int run_trainer(const TrainConfig& config, std::shared_ptr<World> world);

}  // namespace dtrain

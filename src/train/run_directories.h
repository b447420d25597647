// Rank 0 locks the run and checkpoint directories before writing anything into them, so two runs
// never share one; a lock left by a dead run is taken over (the kernel released it). Then the start
// rules (train/run_start.h) decide what this start resumes, with the directories held.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ckpt/directory_lock.h"
#include "train/run_start.h"
#include "train/train_config.h"

namespace dtrain {

struct ClaimedRun {
  std::unique_ptr<DirectoryLock> run_lock, checkpoint_lock;  // held for the run's life
  StartPlan start;
  std::vector<std::string> notes;  // for the run's log: locks taken over, the start plan's notes
};

// Sets config.run_dir to the default when empty. Throws ConfigError naming the key of a path that
// is not a directory, and what DirectoryLock throws for one another run holds.
ClaimedRun claim_run_directories(TrainConfig& config, int restart_count);

}  // namespace dtrain

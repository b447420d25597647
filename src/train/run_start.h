// What a run may do with what earlier runs left in its run and checkpoint directories, decided by
// rank 0 while it holds both directories' locks and before it writes anything into them
// (docs/training.md, "Which checkpoints a run continues and prunes"):
// - a run never writes over its own input: a --config that is the run directory's config.json is refused;
// - a run directory holding another run's files (config.json, metrics.jsonl, rank logs) is refused
//   unless this run resumes it;
// - a first start that does not resume the newest checkpoints (train.resume=never, or an explicit
//   path) is refused while checkpoint.dir holds checkpoints beyond the step it starts from: its saves
//   would replace them and a restart would resume them instead of its own;
// - train.start_over=true removes what is in the way instead of refusing, and says what it removed;
// - train.resume applies to a job's first start: a restart continues the newest checkpoint the job wrote.
#pragma once
#include <string>
#include <vector>

#include "train/train_config.h"

namespace dtrain {

struct StartPlan {
  std::string resume;              // what to resume now: "auto", "never" or a path
  std::vector<std::string> notes;  // for the log: what a restart resumes, what start_over removed
};

// The error for a train.resume path that names no checkpoint: `problem` says what it is instead.
ConfigError resume_path_error(const std::string& problem);
// Whether a train.resume path is `checkpoint_dir` itself or a checkpoint in it: a run resuming it
// continues that directory (its files, its lineage).
bool resumes_within(const std::string& resume, const std::string& checkpoint_dir);
// Throws resume_path_error when train.resume is a path that is not a directory (nothing is read).
void require_resume_path(const TrainConfig& config);

// Throws ConfigError naming the key and what is in the way. `restart_count` is the job's
// (DTRAIN_RESTART_COUNT). May remove files only when config.start_over asks for it.
StartPlan plan_start(const TrainConfig& config, int restart_count);

}  // namespace dtrain

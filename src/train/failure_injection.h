// train.inject_failure (TorchFT's fail_at(rank, step)): the config's front-end of ckpt/crash_points.h,
// for fault-tolerance tests and soaks. A list of entries
//   {"rank": 1, "step": 5, "phase": "backward", "round": 0}
// each of which kills that rank with SIGKILL when it reaches that phase of that step, in that
// restart round of the launcher ("round" is optional: 0, the job's first start, so that a restarted
// job does not die again at the same place). Phases are the crash points' names.
#pragma once
#include <string>
#include <vector>

#include "ckpt/crash_points.h"
#include "train/config_reader.h"

namespace dtrain {

// Reads and checks the key (after train.steps and the parallel dims): every entry is refused, named
// by its index, when a field is missing, unknown or out of range, or when its phase could never be
// reached in this job (a step past train.steps, "manifest" or "commit" on a rank other than 0, a
// data-parallel phase under pipeline parallelism or "pipeline" without it).
std::vector<CrashAt> resolve_inject_failure(const Reader& r, const TrainConfig& c);

// Refuses an entry whose rank the job's `world_size` ranks do not have; the launcher's check, once,
// since an elastic job's later rounds may run at another size.
void require_injected_ranks_exist(const std::vector<CrashAt>& entries, int world_size);

// "fault injection armed (train.inject_failure): rank 1 at step 5 (backward) in round 0, ...": said
// loudly at every start of a job that sets the key, so nobody trains with it by accident.
std::string fault_injection_armed_line(const std::vector<CrashAt>& entries);

}  // namespace dtrain

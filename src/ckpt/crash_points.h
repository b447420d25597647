// Fault injection: a process kills itself with SIGKILL at a named point of a chosen step, exactly as
// a kill -9 from outside would land there. Two front-ends arm the same entries ("point:step:round:rank"):
// - DTRAIN_CRASH_AT, the tests' environment form: entries separated by commas;
// - the config key train.inject_failure (train/failure_injection.h), whose entries the trainer arms
//   when it starts.
// An entry fires in the process whose RANK and DTRAIN_RESTART_COUNT (the launcher's round, 0 on the
// first start) match it, when it reaches that point at that step. Points (crash_point_names()):
// - "forward": the step's first micro-batch has been through the forward pass, not yet backward;
// - "backward": inside autograd's backward of that micro-batch, before any parameter's gradient;
// - "collective": the step's gradient reductions are issued (the bucketed sync launched what
//   backward completed) and this rank leaves before waiting for them, its peers inside them;
// - "optimizer": this rank's parameters are updated (under ZeRO, their all-gather issued), the
//   step not yet logged;
// - "step": a training step finished;
// - "write": this rank's checkpoint files written, before the ranks agree that every rank wrote
//   its own (so that checkpoint is never committed);
// - "save": every rank's files written and agreed, nothing committed; on a rank other than 0 the
//   kill races rank 0's commit, which may complete;
// - "manifest": manifest written, directory not yet renamed (rank 0, which commits);
// - "commit": renamed into place, `latest` not yet rewritten (rank 0);
// - "async_write": an asynchronous save's background thread has written this rank's files while
//   training goes on, before the ranks agree (so that checkpoint is never committed);
// - "pipeline": mid-step under pipeline parallelism: this stage's first action of the step done, its
//   neighbours waiting on it.
// "forward", "backward" and "collective" are points of the data-parallel step (no pipeline stages).
// Nothing armed, a call costs a getenv and one short string.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct CrashAt {
  std::string point;
  int64_t step = 0;
  int64_t round = 0;
  int64_t rank = 0;

  // "point:step:round:rank", DTRAIN_CRASH_AT's form of the entry.
  std::string entry() const;
};

// Every point some code reaches, in the order a step reaches them.
const std::vector<std::string>& crash_point_names();

// Adds `entries` to those DTRAIN_CRASH_AT holds, for the rest of the process. Called before the
// points are reached (the trainer arms the config's entries as it starts).
void arm_crash_points(const std::vector<CrashAt>& entries);

// Whether an entry of this process is armed at `point` of `step`: for points reached through a
// callback (the "backward" hook), which is set up only then.
bool crash_point_due(const char* point, int64_t step);

// Kills this process with SIGKILL when an entry of it is armed at `point` of `step`.
void crash_point(const char* point, int64_t step);

}  // namespace dtrain

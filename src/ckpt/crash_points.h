// Fault injection for the crash-consistency tests. DTRAIN_CRASH_AT holds entries
// "point:step:round:rank" separated by commas; a process whose RANK and DTRAIN_RESTART_COUNT match
// an entry kills itself with SIGKILL when it reaches that point at that step, exactly as a kill -9
// from outside would land there. Points: "step" (a training step finished), "save" (this rank's
// checkpoint files written, nothing committed), "manifest" (manifest written, directory not yet
// renamed), "commit" (renamed into place, `latest` not yet rewritten), "pipeline" (mid-step: this
// pipeline stage's first action of the step done, its neighbours waiting on it), "async_write" (an
// asynchronous save's background thread has written this rank's files while training goes on,
// nothing committed). Unset, a call costs a getenv
// and one short string.
#pragma once
#include <cstdint>

namespace dtrain {

void crash_point(const char* point, int64_t step);

}  // namespace dtrain

// train.trace: the run's Chrome/Perfetto trace. Each rank records its executor's actions and its
// collectives in a ChromeTrace (comm/chrome_trace.h); when the run ends they become one trace.json
// in the run directory: one process per rank (pid = rank, named "rank N"), its compute on thread 0
// and its collectives on threads "comm 1", "comm 2", ... (as many as were in flight at once), times
// in microseconds from the moment the first rank left a barrier at the start.
//
// Ranks on rank 0's host share its steady_clock, so their slices line up exactly; a rank on another
// host is placed by the barrier's exit alone, which the network's latency offsets (approximate).
// Each rank hands its events to rank 0 through the job's store, so no shared file system is needed
// and rank 0 merges once it has every rank's (a store wait, not a sleep).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "comm/chrome_trace.h"
#include "comm/world.h"

namespace dtrain {

class RunTrace {
 public:
  // Every rank, together: a barrier over the world takes the common clock origin, then every
  // collective of this rank records itself too.
  explicit RunTrace(World& world);
  ~RunTrace();
  RunTrace(const RunTrace&) = delete;
  RunTrace& operator=(const RunTrace&) = delete;

  // What executors record their actions in.
  ChromeTrace* trace() const { return trace_.get(); }

  // Every rank, at the run's end: stops recording and sends its events; rank 0 writes
  // run_dir/trace.json (atomically, replacing an earlier start's).
  void write(const std::string& run_dir);

 private:
  World& world_;
  std::shared_ptr<ChromeTrace> trace_;
  double origin_us_;  // steady_clock when this rank left the start barrier
};

// One rank's part: {"rank", "host", "origin_us", "dropped", "events": ChromeTrace::events()}.
// The trace file of every rank's part, in Chrome's JSON format; parts[0] is rank 0's.
nlohmann::json merge_trace_parts(const std::vector<nlohmann::json>& parts);

}  // namespace dtrain

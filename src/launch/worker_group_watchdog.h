// A process that outlives the agent to kill the worker process groups it leaves behind, however the
// agent dies. The parent-death signal reaches only a worker itself, not what a wrapper script started;
// this reaches the worker's whole process group, even after a SIGKILL of the agent.
//
// The agent and the watchdog share an AF_UNIX SOCK_SEQPACKET pair. Only the agent holds its end (and a
// starting worker, between fork and exec, which a dead agent's parent-death signal ends), so end of
// file on the watchdog's side means the agent is gone: no polling, no delay. Each message is one pid_t:
// positive, a group to watch; negative, a group to forget.
#pragma once
#include <sys/types.h>

namespace dtrain {

class WorkerGroupWatchdog {
 public:
  // Forks the watchdog. `max_groups` is how many groups it may watch at once: one round's workers,
  // since the agent forgets every group before it starts the next round.
  explicit WorkerGroupWatchdog(int max_groups);
  // Closes the agent's end, so the watchdog kills whatever is still watched (nothing, after an orderly
  // stop) and exits; waits for it.
  ~WorkerGroupWatchdog();
  WorkerGroupWatchdog(const WorkerGroupWatchdog&) = delete;
  WorkerGroupWatchdog& operator=(const WorkerGroupWatchdog&) = delete;

  // For a freshly forked worker, before exec, once it leads its own process group: asks the watchdog
  // to watch that group. Async-signal-safe. False when the watchdog cannot be told.
  bool watch_own_group() const;
  // Stops watching `group`. Call before its leader is reaped: from then on the id may belong to a
  // stranger.
  void forget(pid_t group) const;

 private:
  int agent_end_ = -1;
  pid_t pid_ = -1;
};

}  // namespace dtrain

// The per-node agent of `dtrain launch`: starts this node's workers with torchrun's env contract,
// forwards their output, and when one fails stops the rest and restarts the whole job (all nodes
// together) or gives up naming the failed rank. No worker outlives it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "launch/job_coordinator.h"
#include "launch/launch_options.h"
#include "launch/worker_group_watchdog.h"
#include "launch/worker_process.h"

namespace dtrain {

class Agent {
 public:
  explicit Agent(LaunchOptions options) : options_(std::move(options)) {}
  // Runs the job to its end; returns the agent's exit code (0 when every worker of every node
  // succeeded).
  int run();

 private:
  enum class Outcome { Success, Failure, Stopped };
  Outcome run_round(JobCoordinator& coord, int round, std::string* failure);
  void start_workers(int port, int round);
  void stop_workers();

  LaunchOptions options_;
  // Started first and declared before the workers, so it outlives every one of them.
  std::unique_ptr<WorkerGroupWatchdog> watchdog_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
};

}  // namespace dtrain

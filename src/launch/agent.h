// The per-node agent of `dtrain launch`: starts this node's workers with torchrun's env contract,
// forwards their output, and when one fails stops the rest and restarts the whole job (all nodes
// together) or gives up naming the failed rank. No worker outlives it. What it says about the job's
// course it also records in the run directory (launch_report.h). With --nnodes MIN:MAX the job is
// elastic: each round's members and node ranks come from the rendezvous (elastic_agent.cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "launch/job_coordinator.h"
#include "launch/launch_report.h"
#include "launch/launch_options.h"
#include "launch/worker_group_watchdog.h"
#include "launch/worker_process.h"

namespace dtrain {

class Agent {
 public:
  explicit Agent(LaunchOptions options)
      : options_(std::move(options)),
        report_(options_.run_dir, options_.node_rank, options_.trainer_claims_run_dir),
        node_rank_(options_.node_rank),
        nnodes_(options_.nnodes) {}
  // Runs the job to its end; returns the agent's exit code (0 when every worker of every node
  // succeeded).
  int run();
  // This node's rank in the job's last round: the one given, or the one an elastic round assigned.
  int node_rank() const { return node_rank_; }

 private:
  // Regroup: an elastic round ended so that a larger one can include the agents waiting to join.
  enum class Outcome { Success, Failure, Stopped, Regroup };
  Outcome run_round(JobCoordinator& coord, int round, RoundFailure* failure, const Membership* elastic = nullptr);
  // The elastic job's rounds, from the first rendezvous to the job's end; returns the exit code.
  int run_elastic(JobCoordinator& coord);
  // An agent stopped by a signal tells the others and ends.
  int finish_stopped(JobCoordinator& coord, int round);
  void start_workers(int port, int round);
  void stop_workers();
  // Prints a message about the job's course and records it in the report.
  void tell(const std::string& message);
  // Prints and records the verdict; returns `exit_code`, whatever became of the report.
  int finish(const std::string& outcome, int exit_code, int round, const std::string& verdict,
             const RoundFailure* failure);
  // The run directory the trainer's rank 0 published in the store once it held it: the report's
  // directory when none was given, and, either way, one this job holds.
  void learn_run_dir(JobCoordinator& coord, int round);

  LaunchOptions options_;
  LaunchReport report_;
  // Started first and declared before the workers, so it outlives every one of them.
  std::unique_ptr<WorkerGroupWatchdog> watchdog_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  bool run_dir_published_ = false;
  int node_rank_;  // this round's; fixed unless elastic
  int nnodes_;
  // Elastic: what the workers are told of the round before (DTRAIN_PREVIOUS_WORLD_SIZE,
  // DTRAIN_FAILURE_TIME); 0 when there was none.
  int previous_world_ = 0;
  double failure_time_ = 0;
  std::string shared_memory_prefix_;  // this round's workers' segment names (launch/worker_env.h)
};

}  // namespace dtrain

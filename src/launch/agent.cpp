#include "launch/agent.h"

#include <poll.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <thread>

#include "launch/worker_env.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_stop_signal{0};
void on_stop_signal(int sig) { g_stop_signal = sig; }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

void say(const std::string& line, std::ostream& out = std::cout) { out << "dtrain launch: " << line << std::endl; }

std::string restarts(int n) { return std::to_string(n) + " restart" + (n == 1 ? "" : "s"); }

// Unix seconds with milliseconds, as DTRAIN_FAILURE_TIME carries them.
std::string unix_time_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds);
  return text;
}

}  // namespace

void Agent::tell(const std::string& message) {
  say(message);
  report_.record(message);
}

int Agent::finish(const std::string& outcome, int exit_code, int round, const std::string& verdict,
                  const RoundFailure* failure) {
  say(verdict, outcome == "error" ? std::cerr : std::cout);
  const std::string where = report_.finish(outcome, exit_code, round, verdict, failure);
  if (exit_code != 0 && !where.empty()) say(where);
  return exit_code;
}

void Agent::learn_run_dir(JobCoordinator& coord, int round) {
  if (run_dir_published_) return;
  try {
    const auto dir = coord.published_run_dir(round);
    if (!dir) return;
    run_dir_published_ = true;
    if (!report_.knows_run_dir()) report_.set_run_dir(*dir);
    report_.job_holds(*dir);
  } catch (const std::exception&) {
    // Then the report goes by the directory's lock alone, as for a program that publishes none.
  }
}

void Agent::start_workers(int port, int round) {
  shared_memory_prefix_ = shared_memory_prefix(options_.master_addr, port, round);
  const int world = nnodes_ * options_.nproc_per_node;
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    const int rank = node_rank_ * options_.nproc_per_node + local;
    std::map<std::string, std::string> env{
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(local)},
        {"WORLD_SIZE", std::to_string(world)},
        {"LOCAL_WORLD_SIZE", std::to_string(options_.nproc_per_node)},
        {"GROUP_RANK", std::to_string(node_rank_)},
        {"ROLE_RANK", std::to_string(rank)},
        {"ROLE_WORLD_SIZE", std::to_string(world)},
        {"MASTER_ADDR", options_.master_addr},
        {"MASTER_PORT", std::to_string(port)},
        {"DTRAIN_RESTART_COUNT", std::to_string(round)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(round)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options_.max_restarts)},
        {"DTRAIN_AGENT_STORE", "1"},
    };
    if (previous_world_ > 0) env["DTRAIN_PREVIOUS_WORLD_SIZE"] = std::to_string(previous_world_);
    if (failure_time_ > 0) env["DTRAIN_FAILURE_TIME"] = unix_time_text(failure_time_);
    // As torchrun: many ranks on one host must not each start a thread per core.
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if (!omp || !*omp) env["OMP_NUM_THREADS"] = "1";
    workers_.push_back(std::make_unique<WorkerProcess>(rank, options_.program, env, *watchdog_));
  }
}

void Agent::stop_workers() {
  for (auto& w : workers_) w->signal_group(SIGTERM);
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.grace_s * 1000));
  for (;;) {
    bool all = true;
    for (auto& w : workers_) {
      w->pump_output();
      all = w->poll_exit() && all;
    }
    if (all) break;
    if (Clock::now() > deadline) {
      for (auto& w : workers_) w->signal_group(SIGKILL);
      for (auto& w : workers_)
        while (!w->poll_exit()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& w : workers_)
    while (w->pump_output()) {
    }
  workers_.clear();
  // Workers remove their segments' names once every member has mapped them; one killed before that
  // leaves a name behind.
  if (const int left = remove_shared_memory(shared_memory_prefix_))
    tell("removed " + std::to_string(left) + " shared-memory segment(s) the workers left in /dev/shm");
}

Agent::Outcome Agent::run_round(JobCoordinator& coord, int round, RoundFailure* failure, const Membership* elastic) {
  start_workers(coord.port(), round);
  bool reported_done = false;
  auto next_report_check = Clock::now(), next_waiting_check = Clock::now();
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& w : workers_)
      if (w->output_fd() >= 0) fds.push_back({w->output_fd(), POLLIN, 0});
    if (fds.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    else poll(fds.data(), fds.size(), 50);
    for (auto& w : workers_) w->pump_output();

    if (g_stop_signal) return Outcome::Stopped;
    bool all_succeeded = true;
    for (auto& w : workers_) {
      if (w->poll_exit() && !w->succeeded()) {
        w->pump_output();
        failure->rank = w->rank();
        failure->how = w->how_it_ended();
        failure->what = "rank " + std::to_string(w->rank()) + " failed: " + failure->how;
        failure->restartable = !w->refused_input();
        if (!failure->restartable) failure->what += " (it refused its configuration)";
        failure->last_lines.assign(w->tail().begin(), w->tail().end());
        std::string message = failure->what + "\n  last lines of rank " + std::to_string(w->rank()) + ":";
        if (w->tail().empty()) message += " (none)";
        for (const auto& line : w->tail()) message += "\n  | " + line;
        tell(message);
        coord.report_failure(round, failure->what, failure->restartable);
        return Outcome::Failure;
      }
      all_succeeded = all_succeeded && w->succeeded();
    }
    if (all_succeeded && !reported_done) {
      coord.report_done(round);
      reported_done = true;
    }
    if (reported_done && coord.all_done(round)) return Outcome::Success;
    coord.heartbeat();
    // The run directory appears once the trainer has made it: the report starts then, not at the end.
    if (Clock::now() >= next_report_check) {
      learn_run_dir(coord, round);
      report_.flush();
      next_report_check = Clock::now() + std::chrono::seconds(1);
    }
    if (elastic && Clock::now() >= next_waiting_check) {
      next_waiting_check = Clock::now() + std::chrono::milliseconds(200);
      if (coord.larger_round_waiting(*elastic)) {
        failure->what = "a node is waiting to join: round " + std::to_string(round) + " ends so that the next one includes it";
        tell(failure->what);
        coord.report_failure(round, failure->what);
        return Outcome::Regroup;
      }
    }
    if (auto remote = coord.failure(round)) {
      failure->what = *remote;
      failure->restartable = !coord.failure_is_final(round);
      tell("the job failed elsewhere: " + *remote);
      return Outcome::Failure;
    }
  }
}

int Agent::finish_stopped(JobCoordinator& coord, int round) {
  try {
    // A fixed-size job cannot go on without this node, so its other nodes stop rather than restart
    // and wait for it; an elastic job regroups without it.
    coord.report_failure(round, "node " + std::to_string(node_rank_) + "'s agent was stopped by a signal", options_.elastic);
  } catch (const std::exception&) {
  }
  const int sig = g_stop_signal.load();
  return finish("stopped", 128 + sig, round, "stopped by signal " + std::to_string(sig) + "; workers terminated", nullptr);
}

int Agent::run() {
  install_signal_handlers();
  watchdog_ = std::make_unique<WorkerGroupWatchdog>(options_.nproc_per_node);
  std::unique_ptr<JobCoordinator> coord;
  try {
    coord = std::make_unique<JobCoordinator>(options_);
  } catch (const std::exception& e) {
    return finish("error", 1, 0, std::string("error: ") + e.what(), nullptr);
  }
  if (options_.elastic) return run_elastic(*coord);
  tell("node " + std::to_string(options_.node_rank) + " of " + std::to_string(options_.nnodes) + ", " +
       std::to_string(options_.nproc_per_node) + " workers, rendezvous store at " + options_.master_addr + ":" +
       std::to_string(coord->port()));
  for (int round = 0;; ++round) {
    RoundFailure failure;
    Outcome outcome;
    try {
      coord->join_round(round);
      outcome = run_round(*coord, round, &failure);
    } catch (const std::exception& e) {
      // Losing the store means losing node 0: nothing left to coordinate with.
      stop_workers();
      return finish("error", 1, round, std::string("error: ") + e.what(), nullptr);
    }
    stop_workers();
    // Node 0 hosts the store: asking it cannot hang on a network that is gone. Other nodes asked
    // while the round ran.
    if (options_.node_rank == 0) learn_run_dir(*coord, round);
    if (outcome == Outcome::Stopped) return finish_stopped(*coord, round);
    if (outcome == Outcome::Success) {
      coord->leave(round);
      return finish("succeeded", 0, round, round == 0 ? "the job succeeded" : "the job succeeded after " + restarts(round),
                    nullptr);
    }
    if (!failure.restartable && options_.max_restarts > 0)
      return finish("failed", 1, round, "not restarting: " + failure.what + ", and a restart would be refused the same way", &failure);
    if (round >= options_.max_restarts)
      return finish("failed", 1, round,
                    "giving up after " + restarts(round) + " (--max-restarts " + std::to_string(options_.max_restarts) +
                        "): " + failure.what,
                    &failure);
    tell("restarting the job (restart " + std::to_string(round + 1) + " of " + std::to_string(options_.max_restarts) + ")");
  }
}

}  // namespace dtrain

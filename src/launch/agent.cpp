#include "launch/agent.h"

#include <poll.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <thread>

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

void say(const std::string& line) {
  std::cout << "dtrain launch: " << line << std::endl;
}

}  // namespace

void Agent::start_workers(int port, int round) {
  const int world = options_.nnodes * options_.nproc_per_node;
  for (int local = 0; local < options_.nproc_per_node; ++local) {
    const int rank = options_.node_rank * options_.nproc_per_node + local;
    std::map<std::string, std::string> env{
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(local)},
        {"WORLD_SIZE", std::to_string(world)},
        {"LOCAL_WORLD_SIZE", std::to_string(options_.nproc_per_node)},
        {"GROUP_RANK", std::to_string(options_.node_rank)},
        {"ROLE_RANK", std::to_string(rank)},
        {"ROLE_WORLD_SIZE", std::to_string(world)},
        {"MASTER_ADDR", options_.master_addr},
        {"MASTER_PORT", std::to_string(port)},
        {"DTRAIN_RESTART_COUNT", std::to_string(round)},
        {"TORCHELASTIC_RESTART_COUNT", std::to_string(round)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options_.max_restarts)},
        {"DTRAIN_AGENT_STORE", "1"},
    };
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
}

Agent::Outcome Agent::run_round(JobCoordinator& coord, int round, std::string* failure) {
  start_workers(coord.port(), round);
  bool reported_done = false;
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
        *failure = "rank " + std::to_string(w->rank()) + " failed: " + w->how_it_ended();
        std::string report = *failure + "\n  last lines of rank " + std::to_string(w->rank()) + ":";
        if (w->tail().empty()) report += " (none)";
        for (const auto& line : w->tail()) report += "\n  | " + line;
        say(report);
        coord.report_failure(round, *failure);
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
    if (auto remote = coord.failure(round)) {
      *failure = *remote;
      say("the job failed elsewhere: " + *remote);
      return Outcome::Failure;
    }
  }
}

int Agent::run() {
  install_signal_handlers();
  watchdog_ = std::make_unique<WorkerGroupWatchdog>(options_.nproc_per_node);
  std::unique_ptr<JobCoordinator> coord;
  try {
    coord = std::make_unique<JobCoordinator>(options_);
  } catch (const std::exception& e) {
    std::cerr << "dtrain launch: error: " << e.what() << std::endl;
    return 1;
  }
  if (options_.node_rank == 0)
    say("node 0 of " + std::to_string(options_.nnodes) + ", " + std::to_string(options_.nproc_per_node) +
        " workers, rendezvous store at " + options_.master_addr + ":" + std::to_string(coord->port()));
  for (int round = 0;; ++round) {
    std::string failure;
    Outcome outcome;
    try {
      coord->join_round(round);
      outcome = run_round(*coord, round, &failure);
    } catch (const std::exception& e) {
      // Losing the store means losing node 0: nothing left to coordinate with.
      failure = e.what();
      std::cerr << "dtrain launch: error: " << failure << std::endl;
      stop_workers();
      return 1;
    }
    stop_workers();
    if (outcome == Outcome::Stopped) {
      say("stopped by signal " + std::to_string(g_stop_signal.load()) + "; workers terminated");
      try {
        coord->report_failure(round, "node " + std::to_string(options_.node_rank) + "'s agent was stopped by a signal");
      } catch (const std::exception&) {
      }
      return 128 + g_stop_signal.load();
    }
    if (outcome == Outcome::Success) {
      coord->leave(round);
      return 0;
    }
    if (round >= options_.max_restarts) {
      say("giving up after " + std::to_string(round) + " restart" + (round == 1 ? "" : "s") + " (--max-restarts " +
          std::to_string(options_.max_restarts) + "): " + failure);
      return 1;
    }
    say("restarting the job (restart " + std::to_string(round + 1) + " of " + std::to_string(options_.max_restarts) + ")");
  }
}

}  // namespace dtrain

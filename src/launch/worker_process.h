// One worker process as the agent sees it: started with its env, its output read line by line
// (forwarded with a rank prefix and the tail kept for the failure report), its end observed, and
// stopped — with its whole process group — when the job must stop.
#pragma once
#include <sys/types.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "launch/worker_group_watchdog.h"

namespace dtrain {

// The exit code of a worker that refused its configuration or command line (`dtrain train` exits
// with it on a usage or configuration error). Starting it again cannot help: the input is the same.
constexpr int kRefusedInputExitCode = 2;

class WorkerProcess {
 public:
  // Forks and execs `argv` with the agent's environment plus `env` (which wins on conflict), its
  // process group watched by `watchdog` (which must outlive it) from before the exec.
  WorkerProcess(int global_rank, const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                const WorkerGroupWatchdog& watchdog);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  int rank() const { return rank_; }
  int output_fd() const { return out_fd_; }
  // Reads what is available on the output pipe and prints complete lines as "[rank r] line".
  // Returns false once the pipe is closed.
  bool pump_output();
  // Non-blocking: true once the process has ended (its status is then available).
  bool poll_exit();
  bool succeeded() const { return exited_ && !signaled_ && exit_code_ == 0; }
  // It exited with kRefusedInputExitCode: its configuration or command line was refused.
  bool refused_input() const { return exited_ && !signaled_ && exit_code_ == kRefusedInputExitCode; }
  // "exit code 3" or "signal 9 (SIGKILL)".
  std::string how_it_ended() const;
  // The last lines it printed, oldest first.
  const std::deque<std::string>& tail() const { return tail_; }

  // Sends `sig` to the worker's process group (the worker and anything it started).
  void signal_group(int sig);

 private:
  void emit(const std::string& line);
  // Kills what is left of the group, has the watchdog forget it, then reaps the worker.
  void reap();

  int rank_;
  const WorkerGroupWatchdog& watchdog_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string partial_;          // output after the last newline
  std::deque<std::string> tail_;  // the last kTailLines lines
  bool exited_ = false;
  bool signaled_ = false;
  int exit_code_ = 0;
  int signal_ = 0;
};

}  // namespace dtrain

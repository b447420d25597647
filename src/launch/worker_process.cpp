#include "launch/worker_process.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "launch/child_process.h"
#include "launch/output_lines.h"

namespace dtrain {
namespace {
constexpr size_t kTailLines = 20;
}

WorkerProcess::WorkerProcess(int global_rank, const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& env, const WorkerGroupWatchdog& watchdog)
    : rank_(global_rank), watchdog_(watchdog) {
  ChildSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.who = "dtrain launch";
  // What the worker starts is the watchdog's to stop, told before the program can start anything.
  spec.in_child = [&watchdog] {
    if (watchdog.watch_own_group()) return true;
    fprintf(stderr, "dtrain launch: cannot hand the worker to the launcher's watchdog: %s\n", strerror(errno));
    return false;
  };
  const StartedChild child = start_child(spec);
  pid_ = child.pid;
  out_fd_ = child.output_fd;
}

WorkerProcess::~WorkerProcess() {
  if (!exited_) reap();
  if (out_fd_ >= 0) close(out_fd_);
}

void WorkerProcess::emit(const std::string& line) {
  std::printf("[rank %d] %s\n", rank_, line.c_str());
  tail_.push_back(line);
  if (tail_.size() > kTailLines) tail_.pop_front();
}

bool WorkerProcess::pump_output() {
  const bool open = pump_lines(out_fd_, partial_, [this](const std::string& line) { emit(line); });
  std::fflush(stdout);
  return open;
}

bool WorkerProcess::poll_exit() {
  if (exited_) return true;
  // Only a look (WNOWAIT): reap() must act while the worker is still unreaped.
  siginfo_t info{};
  if (waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid_) return false;
  reap();
  return true;
}

void WorkerProcess::reap() {
  // An unreaped worker holds its pid, and with it its group's id, so no stranger can own that id yet:
  // the group is killed and forgotten by the watchdog while the id is still the worker's.
  kill(-pid_, SIGKILL);
  watchdog_.forget(pid_);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exited_ = true;
  if (WIFSIGNALED(status)) {
    signaled_ = true;
    signal_ = WTERMSIG(status);
  } else {
    exit_code_ = WEXITSTATUS(status);
  }
}

std::string WorkerProcess::how_it_ended() const {
  if (!exited_) return "still running";
  if (signaled_) {
    const char* name = sigabbrev_np(signal_);
    return "signal " + std::to_string(signal_) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exit code " + std::to_string(exit_code_);
}

void WorkerProcess::signal_group(int sig) {
  if (!exited_) kill(-pid_, sig);
}

}  // namespace dtrain

#include "launch/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "launch/output_lines.h"

namespace dtrain {
namespace {
constexpr size_t kTailLines = 20;
}

WorkerProcess::WorkerProcess(int global_rank, const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& env, const WorkerGroupWatchdog& watchdog)
    : rank_(global_rank), watchdog_(watchdog) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t agent = getpid();
  fflush(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid_ == 0) {
    // Its own process group, so stopping it reaches whatever it started; death with the agent for the
    // worker itself; and, for what it starts, the watchdog, told before the program can start anything.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != agent) _exit(127);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    if (!watchdog.watch_own_group()) {
      fprintf(stderr, "dtrain launch: cannot hand the worker to the launcher's watchdog: %s\n", strerror(errno));
      _exit(127);
    }
    for (auto& kv : env_strings) putenv(const_cast<char*>(kv.c_str()));
    execvp(args[0], args.data());
    fprintf(stderr, "dtrain launch: cannot execute %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid_, pid_);  // also from the parent: whichever runs first, the group exists before any kill
  close(fds[1]);
  out_fd_ = fds[0];
  fcntl(out_fd_, F_SETFL, fcntl(out_fd_, F_GETFL) | O_NONBLOCK);
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

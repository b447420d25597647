#include "launch/worker_group_watchdog.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain {
namespace {

// The watchdog's whole life, in the forked copy of the agent. Only async-signal-safe calls: the agent
// may have had other threads when it forked, whose locks (malloc's among them) stay taken here.
[[noreturn]] void guard_groups(int fd, pid_t* groups, int capacity) {
  // A group of its own and deaf to the signals that stop the agent: what hits the agent's group or the
  // agent must not take the guard with it; only end of file ends it. SIGTTOU too, so that its last
  // word reaches a terminal that stops background writers.
  setpgid(0, 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGTTOU}) sigaction(sig, &ignore, nullptr);
  pid_t* const end = groups + capacity;
  for (;;) {
    pid_t message = 0;
    const ssize_t n = recv(fd, &message, sizeof message, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof message) break;  // end of file: the agent is gone
    // The table cannot overflow: the agent forgets one round's groups before it starts the next.
    pid_t* slot = std::find(groups, end, message > 0 ? 0 : -message);
    if (slot != end) *slot = message > 0 ? message : 0;
  }
  bool killed = false;
  for (pid_t* g = groups; g != end; ++g)
    if (*g > 0) killed = kill(-*g, SIGKILL) == 0 || killed;
  if (killed) {
    static const char kNote[] = "dtrain launch: the agent is gone; its watchdog killed the workers it left\n";
    ssize_t ignored = write(STDERR_FILENO, kNote, sizeof kNote - 1);
    (void)ignored;
  }
  _exit(0);
}

}  // namespace

WorkerGroupWatchdog::WorkerGroupWatchdog(int max_groups) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("socketpair: ") + strerror(errno));
  std::vector<pid_t> groups(max_groups, 0);
  pid_ = fork();
  if (pid_ < 0) {
    const int error = errno;
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + strerror(error));
  }
  if (pid_ == 0) {
    close(fds[0]);
    guard_groups(fds[1], groups.data(), max_groups);
  }
  close(fds[1]);
  agent_end_ = fds[0];
}

WorkerGroupWatchdog::~WorkerGroupWatchdog() {
  close(agent_end_);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool WorkerGroupWatchdog::watch_own_group() const {
  const pid_t group = getpgrp();
  return send(agent_end_, &group, sizeof group, MSG_NOSIGNAL) == sizeof group;
}

void WorkerGroupWatchdog::forget(pid_t group) const {
  // A watchdog that is gone needs no telling: MSG_NOSIGNAL, so that is no SIGPIPE for the agent.
  const pid_t message = -group;
  send(agent_end_, &message, sizeof message, MSG_NOSIGNAL);
}

}  // namespace dtrain

#include "launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace dtrain {

StartedChild start_child(const ChildSpec& spec) {
  // Close-on-exec: no other child may inherit these pipes, or closing one here would not reach its child.
  int in[2] = {-1, -1}, out[2];
  if ((spec.stdin_pipe && pipe2(in, O_CLOEXEC) != 0) || pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> args;
  for (const auto& a : spec.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  fflush(nullptr);
  StartedChild child;
  child.pid = fork();
  if (child.pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (child.pid == 0) {
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);  // ignored in dtrain itself, and an ignored signal stays ignored across exec
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (spec.stdin_pipe) dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    if (spec.in_child && !spec.in_child()) _exit(127);
    for (auto& kv : env_strings) putenv(const_cast<char*>(kv.c_str()));
    execvp(args[0], args.data());
    fprintf(stderr, "%s: cannot execute %s: %s\n", spec.who.c_str(), args[0], strerror(errno));
    _exit(127);
  }
  setpgid(child.pid, child.pid);  // also from the parent: whichever runs first, the group exists before any kill
  if (spec.stdin_pipe) {
    close(in[0]);
    child.stdin_fd = in[1];
  }
  close(out[1]);
  child.output_fd = out[0];
  fcntl(child.output_fd, F_SETFL, fcntl(child.output_fd, F_GETFL) | O_NONBLOCK);
  return child;
}

}  // namespace dtrain

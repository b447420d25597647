// Starting a child the launcher supervises (a worker, or the ssh connection to a host's agent): in a
// process group of its own, so that stopping it reaches whatever it started; killed when the
// launcher dies (PR_SET_PDEATHSIG, and not started at all if the launcher is already gone); its
// standard output and error into one pipe the caller reads without blocking.
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtrain {

struct ChildSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set on top of the launcher's own
  bool stdin_pipe = false;                 // a pipe the caller writes to; otherwise the launcher's stdin
  // Runs in the child before exec; only async-signal-safe calls. False: the child exits 127.
  std::function<bool()> in_child;
  std::string who;  // prefixes the child's "cannot execute" line
};

struct StartedChild {
  pid_t pid = -1;
  int output_fd = -1;  // non-blocking read end of its stdout and stderr
  int stdin_fd = -1;   // write end of its stdin, with stdin_pipe
};

// Throws naming the call that failed (pipe, fork).
StartedChild start_child(const ChildSpec& spec);

}  // namespace dtrain

// The shell command line that starts a node's agent on another host as if it were started here: in
// the same directory, with the environment that shapes a run, by the same binary path. It assumes what
// DeepSpeed's launcher assumes: a file system shared by the hosts (or the same paths on each).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// `text` as one word of a POSIX shell command line.
std::string shell_quote(const std::string& text);

// The variables of this process's environment that go along to every host: DTRAIN_*, NCCL_*,
// OMP_NUM_THREADS, PATH and LD_LIBRARY_PATH (docs/launch.md).
std::vector<std::pair<std::string, std::string>> forwarded_environment();

// `cd DIR && exec env NAME=VALUE... ARGV...`: `argv` run in `dir` with `env` added to the remote
// login's environment. `exec`, so the remote shell is replaced and the agent reads the connection's
// standard input itself.
std::string remote_command_line(const std::vector<std::string>& argv, const std::string& dir,
                                 const std::vector<std::pair<std::string, std::string>>& env);

}  // namespace dtrain

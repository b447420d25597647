// The flags that start a whole multi-node job from one command (`--hostfile`, `--hosts`, how to reach
// a host) and how they turn into each node's agent: node ranks in the host list's order, the master
// address the first host's unless given.
#pragma once
#include <string>
#include <vector>

#include "launch/hostfile.h"
#include "launch/launch_options.h"

namespace CLI { class App; }

namespace dtrain {

struct HostLaunchOptions {
  std::string hostfile;      // DeepSpeed's format, one `HOST slots=N` per line
  std::string hosts;         // "a,b": slots from --nproc-per-node
  std::string remote_shell;  // replaces `ssh ... HOST`: words, `{host}` replaced by the host's name
  int ssh_port = 0;          // 0: ssh's own choice (its config, else 22)
  std::string ssh_opts;      // more words for ssh, e.g. "-i key -o ConnectTimeout=5"
  // For a node's agent started by the launcher: end of file on stdin (the launcher or its connection
  // is gone) stops the agent as SIGHUP would.
  bool stop_on_stdin_eof = false;

  bool starts_hosts() const { return !hostfile.empty() || !hosts.empty(); }
};

// The host flags as given, and the hosts they name, one per node (none: this node alone).
struct HostPlan {
  HostLaunchOptions how;
  std::vector<Host> hosts;
};

void add_host_launch_flags(CLI::App& app, HostLaunchOptions& o);

// With a host list: reads it and fits `launch` (parsed by `app`) to it — nnodes and nproc-per-node
// from the list unless given (then at most what it has: the first N hosts, as DeepSpeed's --num_nodes),
// node ranks in its order, the master address the first host's unless given. Returns the hosts, one
// per node. Throws std::invalid_argument naming the flag, file and line at fault.
std::vector<Host> plan_hosts(const HostLaunchOptions& o, const CLI::App& app, LaunchOptions& launch);

// The flags that make an agent node `node_rank` of `launch`'s job and stop it when its stdin ends.
std::vector<std::string> node_agent_flags(const LaunchOptions& launch, int node_rank);

// The local command that runs the shell command line `command` on `host`: ssh, or the remote shell.
std::vector<std::string> remote_shell_argv(const HostLaunchOptions& o, const std::string& host,
                                           const std::string& command);

}  // namespace dtrain

#include "launch/multi_node_launch.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "launch/remote_agents.h"
#include "launch/remote_command.h"

namespace dtrain {

std::string self_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find the dtrain binary (/proc/self/exe)");
  return std::string(path, size_t(n));
}

int launch_on_hosts(const HostLaunchOptions& o, const std::vector<Host>& hosts, const LaunchOptions& launch,
                    const std::function<std::vector<std::string>(int node_rank)>& agent_argv, const std::string& who) {
  const std::string dir = std::filesystem::current_path().string();
  const auto env = forwarded_environment();
  std::vector<RemoteAgent> agents;
  std::string nodes;
  for (int node = 0; node < int(hosts.size()); ++node) {
    const std::string command = remote_command_line(agent_argv(node), dir, env);
    agents.push_back({hosts[node].name, remote_shell_argv(o, hosts[node].name, command)});
    nodes += (node ? ", " : "") + hosts[node].name;
  }
  std::printf("%s: %d nodes × %d ranks on %s; rendezvous store at %s:%s\n", who.c_str(), launch.nnodes,
              launch.nproc_per_node, nodes.c_str(), launch.master_addr.c_str(),
              launch.master_port ? std::to_string(launch.master_port).c_str() : "(a free port)");
  RemoteAgentsOptions options;
  options.who = who;
  // The agents give their workers the grace period, then need a moment of their own.
  options.stop_timeout_s = launch.grace_s + 30;
  return run_remote_agents(agents, options);
}

}  // namespace dtrain

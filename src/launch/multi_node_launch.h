// A whole multi-node job from one command (`dtrain launch|run --hostfile FILE`): each host's agent
// started there from this directory, with this environment (remote_command.h), and supervised from
// here (remote_agents.h).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "launch/host_launch_options.h"

namespace dtrain {

// The path of this dtrain binary, which each host runs too (the same path on every host).
std::string self_executable();

// Runs node r's agent, `agent_argv(r)` (the same binary, flags from node_agent_flags), on `hosts[r]`
// for every node of `launch` (planned by plan_hosts). `who` is the command, for messages. Returns the
// job's exit code (run_remote_agents).
int launch_on_hosts(const HostLaunchOptions& o, const std::vector<Host>& hosts, const LaunchOptions& launch,
                    const std::function<std::vector<std::string>(int node_rank)>& agent_argv, const std::string& who);

}  // namespace dtrain

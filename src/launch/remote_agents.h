// The multi-node launcher: one command that starts a node's agent on every host (over ssh, or a
// remote shell), streams each host's output with its name before every line, and ends them all
// together. When any host's agent fails, or the launcher gets SIGINT, SIGTERM or SIGHUP, it closes
// every remote agent's standard input; each agent reads end of file and stops its workers
// (stdin_hangup.h). The same happens when the launcher itself dies, however it dies: its end of each
// pipe closes with it, and ssh, which dies with it (parent-death signal), closes the connection.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

struct RemoteAgent {
  std::string host;               // the prefix of its output lines
  std::vector<std::string> argv;  // the local command that runs the agent there (ssh HOST 'cd ... && exec ...')
};

struct RemoteAgentsOptions {
  std::string who = "dtrain run";  // the command, before its own messages
  // How long stopped agents get to stop their workers and end before their connections are cut.
  double stop_timeout_s = 30;
};

// Runs every agent to its end. Returns 0 when all succeeded; else the exit code of the first agent that
// failed (128 + signal when it was killed by one), or 128 + the signal that stopped the launcher.
int run_remote_agents(const std::vector<RemoteAgent>& agents, const RemoteAgentsOptions& options);

}  // namespace dtrain

#include "launch/host_launch_options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace dtrain {
namespace {

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool given(const CLI::App& app, const std::string& flag) { return app.get_option(flag)->count() > 0; }

// Exactly as typed back: a time of 0.5 s stays 0.5, not 0.500000.
std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

}  // namespace

void add_host_launch_flags(CLI::App& app, HostLaunchOptions& o) {
  app.add_option("--hostfile", o.hostfile,
                 "start one agent per host of this file (`HOST slots=N` per line, DeepSpeed's format) over ssh");
  app.add_option("--hosts", o.hosts, "start one agent per host of this list (a,b), --nproc-per-node ranks each");
  app.add_option("--remote-shell", o.remote_shell,
                 "command that runs a command line on a host, in place of ssh: words, {host} replaced by the "
                 "host's name, the command line appended (e.g. \"kubectl exec -i {host} -- sh -c\")");
  app.add_option("--ssh-port,--ssh_port", o.ssh_port, "ssh port of every host (default: ssh's own)")->check(CLI::Range(1, 65535));
  app.add_option("--ssh-opts", o.ssh_opts, "more options for ssh, as words (\"-i KEY -o ConnectTimeout=5\")");
  app.add_flag("--stop-on-stdin-eof", o.stop_on_stdin_eof,
               "stop the job when standard input ends (how an agent started over ssh learns its launcher is gone)");
}

std::vector<Host> plan_hosts(const HostLaunchOptions& o, const CLI::App& app, LaunchOptions& launch) {
  if (!o.hostfile.empty() && !o.hosts.empty()) throw std::invalid_argument("--hostfile and --hosts: give one of them");
  // The launcher stops every host when one fails, which an elastic job must survive: its agents are
  // started one per host, each on its own (docs/launch.md).
  if (launch.elastic)
    throw std::invalid_argument("--nnodes MIN:MAX with a host list: start `dtrain launch --nnodes MIN:MAX` on each host instead, "
                                "with the same --master-addr and --master-port");
  if (given(app, "--node-rank"))
    throw std::invalid_argument("--node-rank: the host list gives each node its rank, in its order; leave it out");
  std::vector<Host> hosts = o.hostfile.empty() ? parse_host_list(o.hosts, launch.nproc_per_node) : read_hostfile(o.hostfile);
  if (given(app, "--nnodes")) {
    if (launch.nnodes > int(hosts.size()))
      throw std::invalid_argument("--nnodes " + std::to_string(launch.nnodes) + " is more nodes than the " +
                               std::to_string(hosts.size()) + " hosts listed");
    hosts.resize(launch.nnodes);
  }
  if (given(app, "--nproc-per-node") && launch.nproc_per_node > hosts[0].slots)
    throw std::invalid_argument("--nproc-per-node " + std::to_string(launch.nproc_per_node) + " is more ranks than " +
                             hosts[0].name + " has (slots=" + std::to_string(hosts[0].slots) + ", " + hosts[0].where + ")");
  if (!given(app, "--nproc-per-node")) launch.nproc_per_node = hosts[0].slots;
  launch.nnodes = int(hosts.size());
  launch.node_rank = 0;
  if (!given(app, "--master-addr")) launch.master_addr = host_address(hosts[0].name);
  return hosts;
}

std::vector<std::string> node_agent_flags(const LaunchOptions& launch, int node_rank) {
  std::vector<std::string> flags{"--nproc-per-node", std::to_string(launch.nproc_per_node),
                                 "--nnodes",         std::to_string(launch.nnodes),
                                 "--node-rank",      std::to_string(node_rank),
                                 "--master-addr",    launch.master_addr,
                                 "--max-restarts",   std::to_string(launch.max_restarts),
                                 "--rdzv-timeout",   number(launch.rdzv_timeout_s),
                                 "--grace-period",   number(launch.grace_s),
                                 "--heartbeat-timeout", number(launch.heartbeat_timeout_s),
                                 "--stop-on-stdin-eof"};
  // A single node picks a free port itself; several need the one port every agent is told.
  if (launch.master_port != 0) flags.insert(flags.end(), {"--master-port", std::to_string(launch.master_port)});
  return flags;
}

std::vector<std::string> remote_shell_argv(const HostLaunchOptions& o, const std::string& host,
                                           const std::string& command) {
  std::vector<std::string> argv;
  if (o.remote_shell.empty()) {
    // BatchMode: a host that wants a password fails at once instead of prompting, unseen, for ever.
    argv = {"ssh", "-o", "BatchMode=yes"};
    if (o.ssh_port) argv.insert(argv.end(), {"-p", std::to_string(o.ssh_port)});
    for (auto& w : words(o.ssh_opts)) argv.push_back(w);
    argv.push_back(host);
  } else {
    for (auto w : words(o.remote_shell)) {
      for (size_t at; (at = w.find("{host}")) != std::string::npos;) w.replace(at, 6, host);
      argv.push_back(w);
    }
  }
  argv.push_back(command);
  return argv;
}

}  // namespace dtrain

#include "launch/launch_command.h"

#include "launch/agent.h"
#include "launch/host_capacity.h"
#include "launch/host_launch_options.h"
#include "launch/launch_options.h"
#include "launch/multi_node_launch.h"
#include "launch/stdin_hangup.h"

namespace dtrain {

int launch_command(int argc, char** argv) {
  LaunchOptions options;
  HostPlan hosts;
  int exit_code = 0;
  if (!parse_launch_options(argc, argv, &options, &hosts, &exit_code)) return exit_code;
  if (!hosts.hosts.empty()) {
    return launch_on_hosts(hosts.how, hosts.hosts, options, [&](int node) {
      std::vector<std::string> agent{self_executable(), "launch"};
      for (auto& flag : node_agent_flags(options, node)) agent.push_back(flag);
      if (!options.run_dir.empty()) agent.insert(agent.end(), {"--run-dir", options.run_dir});
      agent.push_back("--");
      agent.insert(agent.end(), options.program.begin(), options.program.end());
      return agent;
    }, "dtrain launch");
  }
  // Any program: its memory is unknown, its threads are OMP_NUM_THREADS.
  RanksOnHost job;
  job.ranks = options.nproc_per_node;
  job.threads_per_rank = worker_omp_threads();
  if (!admit_on_this_host("dtrain launch", job)) return 1;
  if (hosts.how.stop_on_stdin_eof) hang_up_when_stdin_ends();
  return Agent(options).run();
}

}  // namespace dtrain

#include "launch/launch_command.h"

#include "launch/agent.h"
#include "launch/host_capacity.h"
#include "launch/launch_options.h"

namespace dtrain {

int launch_command(int argc, char** argv) {
  LaunchOptions options;
  int exit_code = 0;
  if (!parse_launch_options(argc, argv, &options, &exit_code)) return exit_code;
  // Any program: its memory is unknown, its threads are OMP_NUM_THREADS.
  RanksOnHost job;
  job.ranks = options.nproc_per_node;
  job.threads_per_rank = worker_omp_threads();
  if (!admit_on_this_host("dtrain launch", job)) return 1;
  return Agent(options).run();
}

}  // namespace dtrain

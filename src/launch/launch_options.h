// `dtrain launch` flags: parsed, defaulted and checked before anything starts.
#pragma once
#include <string>
#include <vector>

namespace CLI { class App; }

namespace dtrain {

struct HostPlan;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;     // fixed size: the nodes of the job; elastic: the most nodes a round takes
  int min_nodes = 1;  // elastic: the fewest nodes a round runs with (--nnodes MIN:MAX)
  bool elastic = false;
  int node_rank = -1;  // fixed size: 0 when not given; elastic: none, a round assigns it (launch/elastic_rendezvous.h)
  double rdzv_last_call_s = 2;  // elastic: a round of at least MIN nodes closes after this long without a new one
  int world_multiple = 1;       // elastic: a round's world (nodes x nproc_per_node) is a multiple of this
  std::string master_addr = "127.0.0.1";
  int master_port = 0;          // 0: a free port on a single node, 29500 (torchrun's) across nodes and when elastic
  int max_restarts = 0;         // restarts of the whole job, counted across all nodes
  double rdzv_timeout_s = 300;  // how long agents wait for each other (and for node 0's store)
  double grace_s = 5;           // SIGTERM-to-SIGKILL grace when stopping workers
  double heartbeat_timeout_s = 10;  // a node whose agent is silent this long has failed
  std::string run_dir;  // where the agent records why the job ended; empty: the one the trainer publishes
  // The program is dtrain's trainer, which publishes its run directory once it holds it and its start
  // rules let it in: the report waits for that, so a refused run writes nothing into the directory.
  bool trainer_claims_run_dir = false;
  std::vector<std::string> program;  // the worker command: PROGRAM ARGS...
};

// Adds the launcher's flags to `app`, writing into `o` (shared by `launch` and `run`).
void add_launch_flags(CLI::App& app, LaunchOptions& o);
// Checks flag combinations and fills defaults; returns an error message, empty when all is well.
std::string finish_launch_options(LaunchOptions& o);

// Parses `launch [flags] -- PROGRAM ARGS...`, with the flags that start the job on a list of hosts
// into `hosts`. Returns false when the caller should exit with `exit_code` (help printed, or a usage
// error already reported on stderr).
bool parse_launch_options(int argc, char** argv, LaunchOptions* out, HostPlan* hosts, int* exit_code);

}  // namespace dtrain

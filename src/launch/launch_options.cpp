#include "launch/launch_options.h"

#include <CLI/CLI.hpp>

#include <climits>
#include <cstring>
#include <iostream>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "common/wait_limit.h"
#include "launch/host_launch_options.h"

namespace dtrain {

void add_launch_flags(CLI::App& app, LaunchOptions& o) {
  // Each flag also under the names torchrun, DeepSpeed and accelerate give it (docs/launch.md).
  app.add_option("--nproc-per-node,--nproc_per_node,--num_gpus", o.nproc_per_node, "workers on this node")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--nnodes,--num_nodes,--num_machines", o.nnodes, "nodes in the job")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--node-rank,--node_rank,--machine_rank", o.node_rank, "this node's rank, 0..nnodes-1")->check(whole_number(0, 99999))->capture_default_str();
  app.add_option("--master-addr,--master_addr,--main_process_ip", o.master_addr, "address of node 0 (hosts the rendezvous store)")->capture_default_str();
  app.add_option("--master-port,--master_port,--main_process_port", o.master_port,
                 "port of the rendezvous store (default: a free port on one node, 29500 across nodes)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--max-restarts", o.max_restarts, "restarts of the whole job before giving up")->check(whole_number(0, INT_MAX))->capture_default_str();
  app.add_option("--rdzv-timeout", o.rdzv_timeout_s, "seconds to wait for all nodes and the store")->check(real_number(0, kMaxWaitSeconds, true))->capture_default_str();
  app.add_option("--grace-period", o.grace_s, "seconds between SIGTERM and SIGKILL when stopping workers")->check(real_number(0, kMaxWaitSeconds))->capture_default_str();
  app.add_option("--heartbeat-timeout", o.heartbeat_timeout_s, "seconds of silence after which a node counts as failed")->check(real_number(0, kMaxWaitSeconds, true))->capture_default_str();
}

std::string finish_launch_options(LaunchOptions& o) {
  if (o.node_rank >= o.nnodes)
    return "--node-rank " + std::to_string(o.node_rank) + " must be smaller than --nnodes " + std::to_string(o.nnodes);
  if (o.master_port == 0 && o.nnodes > 1) o.master_port = 29500;
  if (o.master_port == 0 && o.node_rank != 0) return "--master-port is required on nodes other than 0";
  return "";
}

bool parse_launch_options(int argc, char** argv, LaunchOptions* out, HostPlan* hosts, int* exit_code) {
  LaunchOptions o;
  HostPlan plan;
  // Everything after "--" is the worker's command line, never a launcher flag.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--")) {
      split = i;
      break;
    }
  }
  for (int i = split + 1; i < argc; ++i) o.program.emplace_back(argv[i]);

  CLI::App app{"Start and supervise the workers of one node.\nusage: dtrain launch [options] -- PROGRAM [ARGS...]",
               "dtrain launch"};
  add_launch_flags(app, o);
  // Not among the shared flags: `dtrain run` knows its run directory from the config.
  app.add_option("--run-dir", o.run_dir,
                 "the job's run directory (a trainer's train.run_dir), where the agent records why the job ended "
                 "(launch-node<N>.log, .json) once it exists; default: the one the trainer's rank 0 publishes, on node 0");
  add_host_launch_flags(app, plan.how);
  if (const auto code = parse_command_line(app, split, argv)) {
    *exit_code = *code;
    return false;
  }
  auto usage_error = [&](const std::string& msg) {
    std::cerr << "dtrain launch: error: " << msg << "\n";
    *exit_code = 2;
    return false;
  };
  if (plan.how.starts_hosts()) {
    try {
      plan.hosts = plan_hosts(plan.how, app, o);
    } catch (const std::exception& e) {
      return usage_error(e.what());
    }
  }
  if (auto error = finish_launch_options(o); !error.empty()) return usage_error(error);
  if (o.program.empty()) return usage_error("no worker program: use dtrain launch [options] -- PROGRAM [ARGS...]");
  *out = o;
  *hosts = plan;
  return true;
}

}  // namespace dtrain

#include "train/run_command.h"

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "common/parse_command_line.h"
#include "common/printable.h"
#include "launch/agent.h"
#include "launch/host_capacity.h"
#include "launch/host_launch_options.h"
#include "launch/launch_options.h"
#include "launch/multi_node_launch.h"
#include "launch/stdin_hangup.h"
#include "train/config_preflight.h"
#include "train/failure_injection.h"
#include "train/rank_memory.h"
#include "train/sample_text.h"

namespace dtrain {

namespace {

// `dtrain run` on every host, as node r of the job: the config checked here goes along as its path
// (a shared file system, as DeepSpeed assumes) and the overrides, the run directory among them.
int run_on_hosts(const HostPlan& hosts, const LaunchOptions& launch, const std::string& config_path,
                 const std::vector<std::string>& sets, const std::string* prompt) {
  return launch_on_hosts(hosts.how, hosts.hosts, launch, [&](int node) {
    std::vector<std::string> agent{self_executable(), "run"};
    for (auto& flag : node_agent_flags(launch, node)) agent.push_back(flag);
    if (!config_path.empty()) agent.insert(agent.end(), {"--config", std::filesystem::absolute(config_path).string()});
    for (const auto& s : sets) agent.insert(agent.end(), {"--set", s});
    if (prompt) agent.insert(agent.end(), {"--prompt", *prompt});
    else agent.push_back("--no-sample");
    return agent;
  }, "dtrain run");
}

}  // namespace

int run_command(int argc, char** argv) {
  LaunchOptions launch;
  HostPlan hosts;
  launch.nproc_per_node = std::clamp(int(::sysconf(_SC_NPROCESSORS_ONLN)), 1, 2);
  std::string config_path, prompt = "The ";
  std::vector<std::string> sets;
  bool no_sample = false;
  CLI::App app{"Launch local ranks and train: `dtrain launch` + `dtrain train` in one command. With no arguments it is "
               "the demo: the default model on the built-in corpus, then a sample from the final checkpoint. With --hostfile or "
               "--hosts, it starts the same on every host, one node each.",
               "dtrain run"};
  add_launch_flags(app, launch);
  add_host_launch_flags(app, hosts.how);
  app.add_option("--config", config_path, "JSON config (default: the demo config)");
  app.add_option("--set", sets, "override a key: --set train.steps=100 (repeatable)")->allow_extra_args(false);
  app.add_option("--prompt", prompt, "prompt of the sample printed at the end")->capture_default_str();
  app.add_flag("--no-sample", no_sample, "do not print a sample at the end");
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  auto usage_error = [](const std::string& error) {
    std::cerr << "dtrain run: error: " << error << "\n";
    return 2;
  };
  if (hosts.how.starts_hosts()) {
    try {
      hosts.hosts = plan_hosts(hosts.how, app, launch);
    } catch (const std::exception& e) {
      return usage_error(e.what());
    }
  }
  if (auto error = finish_launch_options(launch); !error.empty()) return usage_error(error);
  if (!no_sample) check_prompt(prompt);
  // Checked once here, before any process starts, as `config check` checks it.
  TrainConfig config = load_run_config(config_path, sets, launch.nproc_per_node * launch.nnodes);
  if (!config.inject_failure.empty()) std::cerr << "dtrain run: WARNING: " << fault_injection_armed_line(config.inject_failure) << "\n";
  // Only dp changes when an elastic job's membership does: every round's world holds whole tp x pp x cp blocks.
  if (launch.elastic) {
    launch.world_multiple = config.parallel.tp * config.parallel.pp * config.parallel.cp;
    if (auto error = finish_launch_options(launch); !error.empty()) {
      std::cerr << "dtrain run: error: " << error << " (the config's parallel.tp x pp x cp)\n";
      return 2;
    }
  }
  // One run directory for all ranks and all restarts, so a restarted job resumes its own checkpoints.
  if (config.run_dir.empty()) {
    config.run_dir = default_run_dir();
    sets.push_back("train.run_dir=" + config.run_dir);
  }
  if (!hosts.hosts.empty()) return run_on_hosts(hosts, launch, config_path, sets, no_sample ? nullptr : &prompt);
  RanksOnHost job;
  job.ranks = launch.nproc_per_node;
  job.threads_per_rank = config.threads > 0 ? config.threads : worker_omp_threads();
  if (config.threads > 0) job.threads_from = "train.threads";
  const RankMemory memory = rank_memory_floor(config, torch::cuda::is_available());
  job.bytes_per_rank = memory.bytes;
  job.bytes_per_rank_how = memory.how;
  job.estimated_peak_per_rank = estimated_rank_peak_on_host(config, torch::cuda::is_available(), launch.nproc_per_node);
  if (!admit_on_this_host("dtrain run", job)) return 1;
  if (hosts.how.stop_on_stdin_eof) hang_up_when_stdin_ends();
  launch.run_dir = config.run_dir;
  launch.trainer_claims_run_dir = true;
  launch.program = {self_executable(), "train"};
  if (!config_path.empty()) launch.program.insert(launch.program.end(), {"--config", config_path});
  for (const auto& s : sets) launch.program.insert(launch.program.end(), {"--set", s});
  Agent agent(launch);
  const int rc = agent.run();
  // Node 0 of the last round samples: an elastic job's agents learn their rank from its rounds.
  if (rc != 0 || no_sample || agent.node_rank() != 0) return rc;
  SamplingOptions options;
  options.seed = config.seed;
  const std::string dir = resolve_checkpoint_dir(config.checkpoint_dir());
  const std::unique_ptr<Tokenizer> tokenizer = load_run_tokenizer(config);
  std::cout << "\nsample from " << printable(dir) << ":\n" << sample_text(dir, prompt, options, *tokenizer) << "\n";
  return 0;
}

}  // namespace dtrain

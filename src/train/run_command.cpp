#include "train/run_command.h"

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "common/parse_command_line.h"
#include "common/printable.h"
#include "launch/agent.h"
#include "launch/host_capacity.h"
#include "launch/launch_options.h"
#include "train/config_preflight.h"
#include "train/rank_memory.h"
#include "train/sample_text.h"

namespace dtrain {

namespace {

std::string self_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot find the dtrain binary (/proc/self/exe)");
  return std::string(path, size_t(n));
}

}  // namespace

int run_command(int argc, char** argv) {
  LaunchOptions launch;
  launch.nproc_per_node = std::clamp(int(::sysconf(_SC_NPROCESSORS_ONLN)), 1, 2);
  std::string config_path, prompt = "The ";
  std::vector<std::string> sets;
  bool no_sample = false;
  CLI::App app{"Launch local ranks and train: `dtrain launch` + `dtrain train` in one command. With no arguments it is "
               "the demo: the default model on the built-in corpus, then a sample from the final checkpoint.",
               "dtrain run"};
  add_launch_flags(app, launch);
  app.add_option("--config", config_path, "JSON config (default: the demo config)");
  app.add_option("--set", sets, "override a key: --set train.steps=100 (repeatable)")->allow_extra_args(false);
  app.add_option("--prompt", prompt, "prompt of the sample printed at the end")->capture_default_str();
  app.add_flag("--no-sample", no_sample, "do not print a sample at the end");
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  if (auto error = finish_launch_options(launch); !error.empty()) {
    std::cerr << "dtrain run: error: " << error << "\n";
    return 2;
  }
  if (!no_sample) check_prompt(prompt);
  // Checked once here, before any process starts, as `config check` checks it.
  TrainConfig config = load_run_config(config_path, sets, launch.nproc_per_node * launch.nnodes);
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
  RanksOnHost job;
  job.ranks = launch.nproc_per_node;
  job.threads_per_rank = config.threads > 0 ? config.threads : worker_omp_threads();
  if (config.threads > 0) job.threads_from = "train.threads";
  const RankMemory memory = rank_memory_floor(config, torch::cuda::is_available());
  job.bytes_per_rank = memory.bytes;
  job.bytes_per_rank_how = memory.how;
  if (!admit_on_this_host("dtrain run", job)) return 1;
  launch.run_dir = config.run_dir;
  launch.trainer_claims_run_dir = true;
  launch.program = {self_executable(), "train"};
  if (!config_path.empty()) launch.program.insert(launch.program.end(), {"--config", config_path});
  for (const auto& s : sets) launch.program.insert(launch.program.end(), {"--set", s});
  const int rc = Agent(launch).run();
  if (rc != 0 || no_sample || launch.node_rank != 0) return rc;
  SamplingOptions options;
  options.seed = config.seed;
  const std::string dir = resolve_checkpoint_dir(config.checkpoint_dir());
  const std::unique_ptr<Tokenizer> tokenizer = load_run_tokenizer(config);
  std::cout << "\nsample from " << printable(dir) << ":\n" << sample_text(dir, prompt, options, *tokenizer) << "\n";
  return 0;
}

}  // namespace dtrain

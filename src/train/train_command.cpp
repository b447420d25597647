#include "train/train_command.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "comm/world.h"
#include "common/parse_command_line.h"
#include "launch/host_capacity.h"
#include "launch/worker_env.h"
#include "train/tensor_memory.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace dtrain {

int train_command(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> sets;
  CLI::App app{"Train as one rank of a job started by `dtrain launch`, mpirun or srun (or alone, as a world of 1).",
               "dtrain train"};
  app.add_option("--config", config_path, "JSON config (default: the demo config)");
  app.add_option("--set", sets, "override a key: --set train.steps=100 (repeatable)")->allow_extra_args(false);
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  track_cpu_tensor_memory();  // before the rank builds anything
  const WorkerEnv env = derive_worker_env(current_env());
  const TrainConfig config = load_train_config(config_path, sets, env.world_size);
  // Checked before the rank joins anyone: a thread count no core can serve makes steps that never end.
  const int threads = config.threads > 0 ? config.threads : worker_omp_threads();
  const std::string threads_error =
      check_threads_per_rank(threads, config.threads > 0 ? "train.threads" : "OMP_NUM_THREADS", HostResources::of_this_host());
  if (!threads_error.empty()) throw ConfigError(threads_error);
  WorldOptions options;
  options.backend = config.backend;
  options.timeout = std::chrono::milliseconds(int64_t(config.timeout_s * 1000));
  return run_trainer(config, World::init(options, env));
}

}  // namespace dtrain

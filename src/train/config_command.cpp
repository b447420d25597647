#include "train/config_command.h"

#include <CLI/CLI.hpp>
#include <torch/cuda.h>

#include <iostream>

#include "common/byte_words.h"
#include "common/parse_command_line.h"
#include "launch/host_capacity.h"
#include "optim/lr_schedule.h"
#include "parallel/pipeline/stage_split.h"
#include "tools/estimate/memory_estimate.h"
#include "train/auto_micro_batch.h"
#include "train/config_preflight.h"
#include "train/estimate_layout.h"
#include "train/rank_memory.h"
#include "train/train_config.h"

namespace dtrain {

namespace {

// "  pipeline   1f1b, pp 2 x 1 virtual stage(s), 8 micro-batches per step; pipeline split (cost
// model): ..." for a pipeline-parallel run, else nothing.
std::string pipeline_line(const TrainConfig& c) {
  const PipelineOptions& p = c.pipeline;
  if (c.parallel.pp == 1 && p.virtual_stages == 1) return "";
  const std::string split = p.measure_split ? "the split is timed at start-up (parallel.pipeline.split auto)"
                                            : describe_split(p.split, model_layer_costs(c.model, c.micro_batch),
                                                             c.json["parallel"]["pipeline"]["split"].is_null() ? "cost model" : "given");
  return "  pipeline   " + schedule_name(p.schedule) + ", pp " + std::to_string(c.parallel.pp) + " x " + std::to_string(p.virtual_stages) +
         " virtual stage(s), " + std::to_string(c.accumulation) + " micro-batches per step; " + split + "\n";
}

// The memory line: the estimate the run compares itself with (tools/estimate), which knows every
// layout it covers (modules kept whole among them); for a layout it does not cover, the floor the
// launcher checks, with what the estimate lacks.
std::string memory_line(const TrainConfig& c, bool device_is_cpu, int ranks_per_node) {
  const MemoryEstimate estimate = estimate_memory(estimate_layout(c, device_is_cpu, ranks_per_node));
  if (estimate.covered()) {
    const RankEstimate& rank = estimate.most_loaded();
    return "estimated " + byte_words(rank.device_bytes()) + " per rank at its peak (" + rank.peak_moment + "), the largest term " +
           rank.largest().name + " (`dtrain estimate` shows every term)";
  }
  const RankMemory floor = rank_memory_floor(c, false);
  return "at least " + byte_words(floor.bytes) + " per rank: " + floor.how + " (activations not included; " + estimate.no_estimate + ")";
}

}  // namespace

int config_command(int argc, char** argv) {
  std::string path;
  std::vector<std::string> sets;
  int world_size = 1;
  CLI::App app{"config check: read a config, apply --set, resolve \"auto\" and the batch arithmetic for a world size, "
               "check what it names (data, NVMe and resume paths, freeze globs, backend) as `dtrain run` does, and print "
               "its warnings and the plan (exit 1 naming the key at fault otherwise).",
               "dtrain config"};
  auto* check = app.add_subcommand("check", "validate a config and print the resolved plan");
  check->add_option("config", path, "JSON config (default: the demo config)");
  check->add_option("--set", sets, "override a key (repeatable)")->allow_extra_args(false);
  check->add_option("--world-size", world_size, "ranks in the job")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.require_subcommand(1);
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  TrainConfig c = load_run_config(path, sets, world_size);
  // The ranks share this host, as `dtrain run` starts them; an "auto" micro-batch is chosen as the run chooses it.
  const bool device_is_cpu = !torch::cuda::is_available();
  const std::string micro_batch_line =
      apply_auto_micro_batch(c, rank_memory_budget(c, device_is_cpu ? at::Device(at::kCPU) : at::Device(at::kCUDA, 0), world_size),
                             device_is_cpu, world_size);
  // As `dtrain run` and every rank check it: this host's cores bound the threads a rank can use.
  if (c.threads > 0)
    if (const std::string error = check_threads_per_rank(c.threads, "train.threads", HostResources::of_this_host()); !error.empty())
      throw ConfigError(error);
  for (const auto& warning : c.warnings) std::cerr << "warning: " << warning << "\n";
  const LrSchedule schedule(c.scheduler, c.base_lr, c.steps);
  // In floating point: with a large batch and many steps the token count overflows an int64.
  const double tokens_per_step = double(c.global_batch) * c.model.seq_len;
  std::cout << "config OK: " << c.origin << "\n"
            << "  model      " << c.model.describe() << "\n"
            << "  data       " << c.data_source << " (validation fraction " << c.val_fraction << ")\n"
            << "  layout     " << c.world_size << " rank(s): " << (c.parallel.pp > 1 ? "pp " + std::to_string(c.parallel.pp) + " x " : "")
            << "dp " << c.dp
            << (c.parallel.cp > 1 ? " x cp " + std::to_string(c.parallel.cp) + " (" + context_impl_name(c.context.impl) + ")" : "")
            << (c.parallel.tp > 1 ? " x tp " + std::to_string(c.parallel.tp) : "") << (c.sequence_parallel ? ", sequence parallel" : "") << "\n"
            << "  batch      " << c.global_batch << " = micro " << c.micro_batch << " x accumulation " << c.accumulation
            << " x dp " << c.dp << " (" << tokens_per_step << " tokens per step)\n"
            << pipeline_line(c)
            << "  steps      " << c.steps << " (" << double(c.steps) * tokens_per_step / 1e6 << "M tokens)\n"
            << "  optimizer  " << c.optimizer.dump() << "\n"
            << "  schedule   " << schedule.type() << ": lr " << schedule.lr(0) << " at step 1, " << schedule.lr(c.steps / 2)
            << " at step " << c.steps / 2 + 1 << ", " << schedule.lr(std::max<int64_t>(0, c.steps - 1)) << " at the last\n"
            << "  memory     " << memory_line(c, device_is_cpu, world_size) << "\n"
            << (micro_batch_line.empty() ? "" : "  " + micro_batch_line + "\n");
  std::cout << c.json.dump(2) << "\n";
  return 0;
}

}  // namespace dtrain

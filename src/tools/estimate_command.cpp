// `dtrain estimate --config CFG [--world-size N | --gpus N --gpu-mem 80GiB --nodes K] [--set k=v ...] [--json] [--plan ...]`.
// The config is resolved as `dtrain run` resolves it for that many ranks, and estimated for the
// most loaded rank. Without --gpu-mem on a machine without GPUs each rank's "device" is the host:
// 90% of its available memory (MemAvailable; the rest for the kernel and the page cache), shared by
// the ranks of one node. With --plan, the layouts for that many ranks ranked by projected step time
// (tools/plan/plan_command.h).
#include "tools/estimate_command.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>
#include <torch/cuda.h>

#include "common/byte_words.h"
#include "common/flag_bounds.h"
#include "common/memory_size.h"
#include "common/parse_command_line.h"
#include "common/printable.h"
#include "launch/host_capacity.h"
#include "model/mixed_precision.h"
#include "tools/estimate_report.h"
#include "tools/plan/plan_command.h"
#include "tools/smallest_world.h"
#include "train/auto_micro_batch.h"
#include "train/estimate_layout.h"

namespace dtrain {

namespace {

constexpr double kHostShare = 0.9;

std::string layout_line(const TrainConfig& c) {
  std::string zero = c.zero_stage > 0 ? " (ZeRO stage " + std::to_string(c.zero_stage) + ")" : " (DDP)";
  return c.model.describe() + "\n" + c.parallel.describe() + zero + "; micro-batch " + std::to_string(c.micro_batch) + " x " +
         std::to_string(c.model.seq_len) + " tokens, " + std::to_string(c.accumulation) + " per step; activation checkpointing " +
         c.activation_checkpointing.describe() + "; " + precision_name(c.precision) + "; optimizer " +
         c.optimizer.value("type", std::string("AdamW"));
}

// A micro-batch left to memory (train/auto_micro_batch.h), chosen as the run chooses it, for the
// target's memory or train.memory_budget; when not even 1 fits, the estimate of 1 shows by how much.
// Returns the line that says what was chosen, "" when the config fixes the micro-batch.
std::string choose_auto_micro_batch(TrainConfig& c, const EstimateTarget& target) {
  try {
    return apply_auto_micro_batch(c, configured_or(c, {target.device_memory, target.device_memory_from}), !target.gpu,
                                  target.ranks_per_node());
  } catch (const ConfigError& e) {
    set_micro_batch(c, 1);
    return e.what();
  }
}

}  // namespace

int estimate_command(int argc, char** argv) {
  std::string config, gpu_mem;
  std::vector<std::string> sets;
  int world_size = 0, gpus = 0, nodes = 1;
  bool json = false;
  CLI::App app{"How much memory each rank of a config's run takes, term by term, and whether it fits.\nCovers: " +
                   [] {
                     std::string s;
                     for (const auto& l : covered_layouts()) s += "\n  " + l;
                     return s;
                   }(),
               "dtrain estimate"};
  app.add_option("--config", config, "JSON config (default: the demo config)");
  auto* world = app.add_option("--world-size", world_size, "ranks (default: the config's own layout, a dp of \"auto\" taken as 1)")
                    ->check(whole_number(1, 1 << 20));
  auto* gpu_count = app.add_option("--gpus", gpus, "GPUs in all, one rank each: estimate for GPUs")->check(whole_number(1, 1 << 20));
  world->excludes(gpu_count);
  app.add_option("--gpu-mem", gpu_mem, "memory of each GPU: 80GiB, 80GB, 24G (default: the CPU build's share of this host)");
  app.add_option("--nodes", nodes, "nodes the ranks are spread over, evenly (default 1)")->check(whole_number(1, 1 << 16));
  app.add_option("--set", sets, "override a key: --set parallel.tp=2 (repeatable)")->allow_extra_args(false);
  app.add_flag("--json", json, "one JSON object: every term in bytes, the most loaded rank's total as total_bytes");
  PlanFlags plan;
  add_plan_flags(app, plan);
  if (const auto code = parse_command_line(app, argc, argv)) return *code;

  EstimateTarget target;
  target.gpu = gpus > 0 || !gpu_mem.empty() || torch::cuda::is_available();
  if (target.gpu && gpu_mem.empty())
    throw std::invalid_argument("--gpu-mem: give each GPU's memory (80GiB, for example) to estimate for GPUs");
  const std::string origin = config.empty() ? "demo config" : printable(config);
  if (plan.plan && !world_size && !gpus) throw std::invalid_argument("--plan: give the ranks to plan for, --world-size or --gpus");
  // A plan's layouts need not include the config's own, which need not resolve for the ranks.
  std::optional<TrainConfig> c =
      plan.plan ? std::nullopt
                : std::optional<TrainConfig>(world_size || gpus ? load_train_config(config, sets, world_size ? world_size : gpus)
                                                                : resolve_at_smallest_world(config, sets, origin + (sets.empty() ? "" : " with --set")));
  target.world_size = c ? c->world_size : world_size ? world_size : gpus;
  target.nodes = nodes;
  if (target.world_size % nodes != 0)
    throw std::invalid_argument("--nodes " + std::to_string(nodes) + " does not divide the " + std::to_string(target.world_size) + " ranks evenly");
  if (!gpu_mem.empty()) {
    const std::optional<double> bytes = parse_memory_size(gpu_mem);
    if (!bytes) throw CLI::ValidationError("--gpu-mem", "'" + printable(gpu_mem) + "' is not a memory size (80GiB, 80GB, 24G, 81920MiB or bytes)");
    target.device_memory = *bytes;
    target.device_memory_from = "--gpu-mem";
  } else {
    const HostResources host = HostResources::of_this_host();
    if (host.available_bytes <= 0) throw std::invalid_argument("--gpu-mem: this host's available memory is unknown; give it");
    target.device_memory = kHostShare * double(host.available_bytes) / target.ranks_per_node();
    target.device_memory_from = "90% of this host's " + byte_words(double(host.available_bytes)) + " available, over " +
                                std::to_string(target.ranks_per_node()) + " rank(s)";
  }
  if (plan.plan)
    return run_plan(plan, {config, sets, target.world_size, nodes, target.gpu, target.device_memory, target.device_memory_from, json});
  const std::string micro_batch_line = choose_auto_micro_batch(*c, target);
  const MemoryEstimate estimate = estimate_memory(estimate_layout(*c, !target.gpu, target.ranks_per_node()));
  if (!estimate.covered()) {
    if (json) std::cout << nlohmann::json{{"no_estimate", estimate.no_estimate}}.dump(2) << "\n";
    std::cerr << "dtrain estimate: " << estimate.no_estimate << "\n";
    return 1;
  }
  if (json) {
    nlohmann::json out = estimate_json(estimate, target, layout_line(*c));
    if (!micro_batch_line.empty()) out["micro_batch_choice"] = micro_batch_line;
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << (micro_batch_line.empty() ? "" : micro_batch_line + "\n\n") << estimate_table(estimate, target, layout_line(*c));
  }
  return 0;
}

}  // namespace dtrain

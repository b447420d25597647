// `dtrain estimate --plan`: every candidate layout for a world size (layout_candidates.h) checked as a
// run checks it (the user's config with the layout's --set lines, resolved by train_config.h), sized
// by the memory estimate (tools/estimate/memory_estimate.h), dropped when the estimate does not cover
// it or it does not fit, and ranked by the projected step time of the cost model (step_cost.h).
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "tools/estimate/memory_estimate.h"
#include "tools/plan/layout_candidates.h"
#include "tools/plan/step_cost.h"
#include "train/train_config.h"

namespace dtrain {

struct PlanOptions {
  int world_size = 1, nodes = 1;
  bool device_is_cpu = true;
  double device_memory = 0;  // bytes per rank
  int64_t max_micro_batch = 0;  // 0: up to the global batch over dp
  Links links;
  // The FLOP/s a rank's GEMMs reach in a layout: a fixed peak, or the matmul probe at the layout's
  // shapes. MFU is against the largest value.
  std::function<double(const MemoryLayout&)> gemm_flops;
  // The cost model's compute rate: what the model's own parts sustain in each layout that fits, all
  // asked at once so that a probe can time them in turns (compute_probes.h); where not given,
  // gemm_flops × `efficiency`.
  std::function<std::vector<double>(const std::vector<MemoryLayout>&)> model_flops;
  double efficiency = 0.5;
  double update_s_per_parameter = 0;  // step_cost.h's CostTarget
};

struct PlannedLayout {
  LayoutChoice choice;
  MemoryLayout layout;
  double device_bytes = 0;  // the most loaded rank's estimate
  StepCost cost;
};

// What became of each candidate. An example message is kept for each reason a layout was dropped.
struct Plan {
  int considered = 0, invalid = 0, not_covered = 0, not_fitting = 0;
  std::string invalid_example, not_covered_example, not_fitting_example;
  int64_t global_batch = 0;
  double peak_flops = 0;  // per rank, what MFU is against
  std::vector<PlannedLayout> ranked;  // every layout that fits, the fastest first
};

// The user's config resolved for the world size, which gives the plan its model, precision and the
// global batch every layout keeps: with the config's own layout when that resolves for the world size,
// else with pure data parallelism (parallel.dp "auto", tp, pp and cp 1), else with that and the
// micro-batch and accumulation "auto". Throws ConfigError when none resolves.
TrainConfig resolve_plan_base(const nlohmann::json& user, int world_size, const std::string& origin);

// `user` is the user's config (a file with its --set lines applied, before resolution); `origin`
// names it in errors. Throws ConfigError when the config itself does not resolve for the world size.
Plan plan_layouts(const nlohmann::json& user, const std::string& origin, const PlanOptions& options);

}  // namespace dtrain

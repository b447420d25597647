#include "tools/plan/layout_planner.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/byte_words.h"
#include "train/estimate_layout.h"

namespace dtrain {

namespace {

// Two projections closer than this are a tie: the model cannot tell them apart. A tie goes to the
// layout with fewer, larger micro-batches (larger GEMMs run nearer the peak, which a fixed
// efficiency does not see; a timed model rate does), then to the one with less memory.
constexpr double kTieFraction = 1e-9;

}  // namespace

TrainConfig resolve_plan_base(const nlohmann::json& user, int world_size, const std::string& origin) {
  const std::vector<std::string> data_parallel = {"parallel.dp=auto", "parallel.tp=1", "parallel.pp=1", "parallel.cp=1",
                                                  "parallel.sequence_parallel=false"};
  std::vector<std::string> free_split = data_parallel;
  for (const char* key : {"train_micro_batch_size_per_gpu=auto", "gradient_accumulation_steps=auto", "parallel.micro_batches=auto"})
    free_split.push_back(key);
  try {
    return resolve_config(user, world_size, origin);
  } catch (const std::exception&) {  // ConfigError, and the mesh's std::invalid_argument
  }
  try {
    nlohmann::json config = user;
    apply_overrides(config, data_parallel);
    return resolve_config(config, world_size, origin + " as pure data parallelism");
  } catch (const std::exception&) {
  }
  // A global batch the config's micro-batch does not divide over these ranks: the plan picks the
  // micro-batch anyway.
  nlohmann::json config = user;
  apply_overrides(config, free_split);
  return resolve_config(config, world_size, origin + " as pure data parallelism with its micro-batch left to the plan");
}

Plan plan_layouts(const nlohmann::json& user, const std::string& origin, const PlanOptions& o) {
  if (o.world_size % o.nodes != 0)
    throw std::invalid_argument("--nodes " + std::to_string(o.nodes) + " does not divide the " + std::to_string(o.world_size) + " ranks evenly");
  const int ranks_per_node = o.world_size / o.nodes;
  Plan plan;
  // The global batch every layout keeps: the config's own, resolved for this world size.
  plan.global_batch = resolve_plan_base(user, o.world_size, origin).global_batch;

  CandidateOptions candidates;
  candidates.world_size = o.world_size;
  candidates.global_batch = plan.global_batch;
  candidates.max_micro_batch = o.max_micro_batch;
  // Offload is a layout of its own only where it moves something (on a GPU), and only once the step's
  // cost prices what it adds (the update on the CPU, the gradients and parameters over the bus):
  // step_cost.h does not yet, so an offloaded layout would rank as fast as its unoffloaded twin.
  candidates.offload = false;
  for (const LayoutChoice& choice : enumerate_layouts(candidates)) {
    ++plan.considered;
    TrainConfig config;
    try {
      nlohmann::json json = user;
      apply_overrides(json, choice.sets());
      config = resolve_config(json, o.world_size, origin + " with " + choice.describe());
    } catch (const std::exception& e) {  // ConfigError, and the mesh's std::invalid_argument
      // A ConfigError names the layout already, through the origin it was resolved under.
      const std::string what = e.what();
      if (plan.invalid++ == 0) plan.invalid_example = what.find(choice.describe()) == std::string::npos ? choice.describe() + ": " + what : what;
      continue;
    }
    PlannedLayout planned;
    planned.choice = choice;
    planned.layout = estimate_layout(config, o.device_is_cpu, ranks_per_node);
    const MemoryEstimate estimate = estimate_memory(planned.layout);
    if (!estimate.covered()) {
      if (plan.not_covered++ == 0) plan.not_covered_example = choice.describe() + ": " + estimate.no_estimate;
      continue;
    }
    planned.device_bytes = estimate.most_loaded().device_bytes();
    if (planned.device_bytes > o.device_memory) {
      if (plan.not_fitting++ == 0)
        plan.not_fitting_example = choice.describe() + ": " + byte_words(planned.device_bytes) + " per rank, " +
                                   byte_words(o.device_memory) + " available";
      continue;
    }
    plan.ranked.push_back(std::move(planned));
  }
  std::vector<double> gemm, rates;
  std::vector<MemoryLayout> layouts;
  for (const PlannedLayout& p : plan.ranked) {
    gemm.push_back(o.gemm_flops(p.layout));
    plan.peak_flops = std::max(plan.peak_flops, gemm.back());
    layouts.push_back(p.layout);
  }
  if (o.model_flops) {
    rates = o.model_flops(layouts);
  } else {
    for (double g : gemm) rates.push_back(g * o.efficiency);
  }
  for (size_t i = 0; i < plan.ranked.size(); ++i) {
    CostTarget target;
    target.world_size = o.world_size;
    target.nodes = o.nodes;
    target.links = o.links;
    target.flops_rate = rates[i];
    target.update_s_per_parameter = o.update_s_per_parameter;
    plan.ranked[i].cost = project_step(plan.ranked[i].layout, target);
  }
  std::stable_sort(plan.ranked.begin(), plan.ranked.end(), [](const PlannedLayout& a, const PlannedLayout& b) {
    const double tie = kTieFraction * std::max(a.cost.step_s, b.cost.step_s);
    if (std::abs(a.cost.step_s - b.cost.step_s) > tie) return a.cost.step_s < b.cost.step_s;
    if (a.choice.accumulation != b.choice.accumulation) return a.choice.accumulation < b.choice.accumulation;
    return a.device_bytes < b.device_bytes;
  });
  return plan;
}

}  // namespace dtrain

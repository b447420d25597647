// `dtrain estimate --plan`'s output: what became of the candidate layouts, the fastest `top` with
// their memory, projected step time, tokens/s and MFU, the best one's cost terms and the --set lines
// that run it; or the same as one JSON object.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "tools/plan/layout_planner.h"

namespace dtrain {

// What the plan assumed, in words, for the reader to check: the model, where the peak and the links
// came from.
struct PlanContext {
  std::string model;       // TransformerConfig::describe()
  std::string memory_from; // "80 GiB per rank (--gpu-mem)"
  std::string peak_from;   // "H100 bf16 datasheet, 989 TFLOP/s"
  std::string rate_from;   // where the compute rate came from: "at 50% of it", or the model probe's words
  std::string links_from;  // "defaults for GPUs"
  std::string run_prefix;  // "build/dtrain run --nproc-per-node 2 --config cfg.json"
};

std::string plan_table(const Plan& plan, const PlanOptions& options, const PlanContext& context, int top);
nlohmann::json plan_json(const Plan& plan, const PlanOptions& options, const PlanContext& context, int top);

}  // namespace dtrain

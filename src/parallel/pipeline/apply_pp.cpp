#include "parallel/pipeline/apply_pp.h"

#include <cstdio>

#include "comm/collectives.h"
#include "parallel/pipeline/stage_split.h"

namespace dtrain {

namespace {

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

// The blocks per chunk, and the log line that says where they come from.
std::vector<int> split_of(World& world, const DeviceMesh& mesh, const TransformerConfig& config, uint64_t seed,
                          const PipelineOptions& options, bool split_given, int64_t micro_batch, const MixedPrecision& mp,
                          std::vector<std::string>& lines) {
  if (!options.measure_split) {
    lines.push_back(describe_split(options.split, model_layer_costs(config, micro_batch), split_given ? "given" : "cost model"));
    return options.split;
  }
  // Every rank times the parts; the average cuts the model alike on all of them.
  const LayerCosts mine = measure_layer_costs(config, micro_batch, mp, world.device(), seed);
  at::Tensor costs = at::tensor({mine.embedding, mine.block, mine.head}, at::kDouble).to(world.device());
  all_reduce(*world.world_group(), costs, ReduceOp::Avg, "pipeline split costs");
  costs = costs.cpu();
  const LayerCosts measured{costs[0].item<double>(), costs[1].item<double>(), costs[2].item<double>()};
  const std::vector<int> split = balance_split(measured, config.n_layer, mesh.size("pp") * options.virtual_stages);
  lines.push_back(describe_split(split, measured, "measured: embedding " + ms(measured.embedding) + ", block " + ms(measured.block) +
                                                      ", head and loss " + ms(measured.head) + " per micro-batch"));
  return split;
}

}  // namespace

PipelineParallelPlan apply_pp(World& world, const DeviceMesh& mesh, const TransformerConfig& config, uint64_t seed,
                              const PipelineOptions& options, bool split_given, int64_t micro_batch, int micro_batches,
                              const MixedPrecision& mp) {
  PipelineParallelPlan plan;
  const std::vector<int> split = split_of(world, mesh, config, seed, options, split_given, micro_batch, mp, plan.setup_lines);
  plan.stages = std::make_shared<PipelineStages>(
      make_pipeline_stages(world, mesh, config, split, options.schedule, options.virtual_stages, micro_batches));
  plan.model = Transformer(config, seed, stage_parts(plan.stages->chunks, mesh.size("pp"), mesh.coord("pp"), config.n_layer));
  for (auto& line : plan.stages->setup_lines) plan.setup_lines.push_back(std::move(line));
  return plan;
}

}  // namespace dtrain

// Pipeline parallelism as one step of parallelize(): the split of the blocks into chunks (given,
// from the cost model, or timed here), the stages' groups and schedule, and this rank's model,
// built with its own chunks alone (pipeline_stages.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "comm/world.h"
#include "model/transformer.h"
#include "parallel/pipeline/pipeline_options.h"
#include "parallel/pipeline/pipeline_stages.h"

namespace dtrain {

struct PipelineParallelPlan {
  Transformer model{nullptr};              // this rank's chunks, on the CPU
  std::shared_ptr<PipelineStages> stages;
  std::vector<std::string> setup_lines;    // the split and its source, the stage
};

// For the mesh's pp dim (more than one rank): `options.split` as given (`split_given`) or from the
// cost model, or, with options.measure_split, balanced by costs every rank times for a micro-batch
// of `micro_batch` in the run's precision `mp` and averages. Throws std::invalid_argument naming the
// key at fault.
PipelineParallelPlan apply_pp(World& world, const DeviceMesh& mesh, const TransformerConfig& config, uint64_t seed,
                              const PipelineOptions& options, bool split_given, int64_t micro_batch, int micro_batches,
                              const MixedPrecision& mp);

}  // namespace dtrain

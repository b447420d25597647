// Pipeline parallelism's cut of the model over the mesh's pp dim: the blocks are split into
// pp x virtual_stages chunks of consecutive blocks (the embedding with chunk 0, the final norm and
// head with the last), chunk c on pp coordinate c % pp (Megatron's interleaving). A rank builds only
// its own chunks (stage_parts), and every parameter's placement names the stages that hold it
// (Placement::held_by), so checkpoints stay layout-free: a tied embedding is held by the first and
// the last stage, one logical weight whose gradient the two sum (the embedding group).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "comm/world.h"
#include "model/transformer.h"
#include "model/transformer_config.h"
#include "parallel/pipeline/pipeline_schedule.h"
#include "parallel/placement.h"

namespace dtrain {

// The chunks' block ranges for `split` (blocks per chunk, in order).
std::vector<BlockRange> chunk_ranges(const std::vector<int>& split);

// What pp coordinate `coord` of `pp` builds: chunks coord, coord + pp, ...
TransformerParts stage_parts(const std::vector<BlockRange>& chunks, int pp, int coord, int n_layer);

// The stage placement (pp: held_by) of every parameter of `config`'s model under `chunks`.
ModelPlacements stage_placements(const TransformerConfig& config, const std::vector<BlockRange>& chunks, int pp);

// What pipeline parallelism built on this rank, for the executor and the plan.
struct PipelineStages {
  PipelineSchedule schedule;
  std::vector<BlockRange> chunks;          // every chunk's blocks
  std::vector<int> local_chunks;           // this rank's chunks, in the order the model holds them
  std::shared_ptr<Group> pp;               // the stages of this rank's pipeline
  std::shared_ptr<Group> embedding;        // ranks holding a copy of the tied embedding; null when there is one copy
  ModelPlacements placements;
  std::vector<std::string> setup_lines;

  int coord() const { return pp->rank(); }
  // The position of chunk c among the model's chunks on this rank.
  size_t local_index(int chunk) const { return size_t(chunk / schedule.pp); }
};

// Builds the groups (every rank calls it, in the same order) and the schedule for a model cut by
// `split` with `virtual_stages` chunks per rank. Throws std::invalid_argument naming the key at fault.
PipelineStages make_pipeline_stages(World& world, const DeviceMesh& mesh, const TransformerConfig& config, const std::vector<int>& split,
                                    ScheduleKind schedule, int virtual_stages, int micro_batches);

}  // namespace dtrain

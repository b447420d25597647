// How a model is laid out over the ranks, as one function: parallelize() applies the run's
// transformations to the model in a fixed order and returns the plan the step, the checkpoints and
// the checks use. The order (docs/decisions.md):
//   0. build        this rank's model: the chunks of blocks pipeline parallelism gives its stage
//                    (parallel/pipeline/apply_pp.h), the whole model without pp;
//   1. freeze        parameters named by train.freeze or frozen by parallel.modules stop needing
//                    gradients (train/module_plan.h);
//   2. model parallelism, each a transformation of its own: tensor (and sequence) parallelism
//                    slices the layers over tp (parallel/tensor/apply_tp.h); context parallelism
//                    gives each cp rank its part of every sequence (parallel/context/apply_cp.h).
//                    They run on the CPU copy the model was built as, so the device never holds
//                    more than this rank's slices;
//   3. place         the model moves to the run's device;
//   4. precision     matmuls compute in the mixed-precision type, with working copies of the slices;
//   5. data parallelism: the trainable parameters are packed into flat buffers and their gradients
//                    reduced over the mesh's data-parallel groups — whole over dp_cp (DDP, ZeRO 1),
//                    or reduce-scattered over dp_shard_cp (ZeRO 2-3) and averaged across the shard's
//                    replicas over dp_replicate (hybrid sharding). The per-module plan is part of this
//                    step: the parameters parallel.modules keeps whole (zero_stage 0 in a run at a
//                    nonzero stage) get buckets of their own, which ZeRO leaves whole on every rank
//                    (parallel/zero/bucket_shards.h): all-reduced, never gathered;
//   6. optimizer     over what this rank updates: the whole buffer, or its ZeRO shard wherever
//                    offloading keeps it.
// Data parallelism comes last among the transformations because it packs what the others leave on a
// rank: a tensor-parallel layer's local piece is what ZeRO shards further.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "comm/world.h"
#include "model/loss.h"
#include "model/row_blocked_table.h"
#include "model/transformer.h"
#include "optim/grad_clip.h"
#include "optim/flat_optimizer.h"
#include "optim/flat_parameters.h"
#include "optim/loss_scaler.h"
#include "parallel/ddp/bucketed_grad_sync.h"
#include "parallel/pipeline/pipeline_stages.h"
#include "parallel/zero/fully_sharded_parameters.h"
#include "parallel/zero/parameter_all_gather.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

struct ParallelPlan {
  std::vector<at::Tensor> frozen;  // parameters that get no gradient, replicated on every rank
  int64_t frozen_numel = 0;
  std::unique_ptr<FlatParameters> flat;
  std::unique_ptr<FullyShardedParameters> sharded;  // ZeRO stage 3 only
  std::unique_ptr<BucketedGradSync> grad_sync;
  std::unique_ptr<RowBlockedTable> row_table;  // ZeRO stage 3 with a tied table the model reads by row blocks
  std::unique_ptr<FlatOptimizer> optimizer;
  ParameterAllGather* parameter_gather = nullptr;  // ZeRO stages 1 and 2 only; owned by optimizer
  std::unique_ptr<LossScaler> scaler;               // fp16 only
  std::shared_ptr<DeviceMesh> mesh;  // the ranks' layout, whose groups every reduction names (comm/device_mesh.h)
  TrainingLayout layout;  // every parameter's placements, and what of it and its optimizer state this rank holds and writes
  std::vector<std::string> setup_lines;  // what was built, for the run's log
  LossFunction loss = next_token_loss;   // of the model's output: the vocab-parallel cross-entropy under tp
  SplitElements split_gradients;         // gradient elements of tensor-parallel slices, for the global norm
  std::vector<std::shared_ptr<Group>> model_parallel_groups;  // the groups model parallelism communicates over (tp, pp, cp)
  std::shared_ptr<PipelineStages> pipeline;  // pp > 1: the stages, their groups and schedule; null without
  StageElements stage_gradients;            // pp > 1: what the global gradient norm sums over the stages
  // ZeRO with parallel.modules keeping parameters whole: where they lie in this rank's shard, and in
  // its gradient shard at stages 2 and 3 (the global norm counts them once). Sorted; empty without.
  Spans kept_whole;

  // Seconds this rank has waited for the model-parallel groups' collectives so far.
  double model_parallel_waited_s() const {
    double s = 0;
    for (const auto& g : model_parallel_groups) s += g->waited_s();
    return s;
  }

  // The tensor the optimizer updates: the flat buffer, or the ZeRO-3 shard.
  at::Tensor& updated_parameters() { return sharded ? sharded->shard() : flat->data(); }
  const Spans& decay_spans() const { return sharded ? sharded->shard_decay() : flat->decay_spans(); }
  // What every rank holds the same copy of: the frozen parameters, and the trainable ones unless
  // ZeRO-3 shards them, where those kept whole are in the shard.
  std::vector<at::Tensor> replicated_parameters() const {
    std::vector<at::Tensor> out = frozen;
    if (!sharded) out.push_back(flat->data());
    else
      for (const Span& s : kept_whole) out.push_back(sharded->shard().narrow(0, s.offset, s.numel));
    return out;
  }
  // Starts recording the step's gathers and frees (ZeRO-3; wall_clock_breakdown's unit trace).
  void start_trace() {
    if (sharded) sharded->start_trace();
  }
  // Lets what offloading keeps on NVMe leave memory, after a step, a check or a save read it whole.
  void evict_offloaded() {
    if (sharded) sharded->evict_shard();
  }
};

// Builds this rank's `model` and applies the transformations above to it, laid out by `mesh` (built
// from config.parallel). Throws ConfigError naming the key at fault.
ParallelPlan parallelize(Transformer& model, World& world, std::shared_ptr<DeviceMesh> mesh, const TrainConfig& config);

}  // namespace dtrain

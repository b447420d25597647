// The training state's placements under data parallelism, and the trainer's side of saving and
// loading it; the checkpoint's format is ckpt/training_checkpoint.h's. Every parameter keeps its
// global identity (its ParamSpec, from the config) and this rank's pieces of it are boxes and flat
// ranges of the global tensor, mapped to where they live in the local flat tensors: a local offset is
// never taken for an offset in the global tensor, so a tensor-parallel piece can later be flattened
// and sharded by ZeRO the same way.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ckpt/host_copies.h"
#include "ckpt/training_checkpoint.h"
#include "model/transformer.h"
#include "optim/flat_optimizer.h"
#include "optim/flat_parameters.h"
#include "parallel/zero/bucket_shards.h"

namespace dtrain {

// Data parallelism's placements, with ZeRO at `zero_stage`, for the rank at `coords` (its place on
// every mesh dim: "dp_replicate" holds the replicas of hybrid sharding, dp_shard x cp the ranks ZeRO
// shards over, every data-parallel rank without hybrid sharding).
// - A trained parameter is replicated, its piece the whole tensor at its place in the flat buffer
//   `params`; at stage 3 it is a flat shard over dp_shard x cp, its pieces this rank's part of each
//   ZeRO bucket (`shards`), at their places in the rank's shard `params`.
// - Its optimizer state follows it, and from stage 1 is a flat shard over dp_shard x cp too, its
//   pieces at the same places of each state tensor as in the shard.
// - A trained parameter `kept_whole` names (parallel.modules zero_stage 0 in a run at a nonzero stage)
//   is replicated with its optimizer state at every stage: whole, at its place in `params` and in
//   the state (its ZeRO bucket is whole on every rank), so a checkpoint says Replicate of it.
// - A frozen parameter is replicated, whole, where the model keeps it.
// - Model parallelism's placements (`model`: a tensor-parallel slice) come first: data parallelism
//   replicates or flat-shards the box they leave this rank.
// - A parameter the placements leave to other pipeline stages is described, with no piece here, and
//   trained unless `frozen` says so of its name (every rank must know the whole model's state).
// Every parameter of `config`'s model (parameter_shapes) in that order; throws std::logic_error naming
// a parameter `model` does not hold as the config and the placements say.
TrainingLayout data_parallel_layout(const TransformerConfig& config, Transformer& model, const FlatParameters& flat, const at::Tensor& params,
                                    const BucketShards& shards, int zero_stage, const std::vector<MeshCoordinate>& coords,
                                    const ModelPlacements& model_placements = {},
                                    const std::function<bool(const std::string&)>& frozen = nullptr,
                                    const std::function<bool(const std::string&)>& kept_whole = nullptr);

// Every rank writes its pieces of the model and the optimizer state into `dir`; the rank at
// coordinate 0 writes what is replicated. Then, once all have written, rank 0 calls
// write_training_index.
void save_training_state(const std::string& dir, int rank, const TrainingLayout& layout, const FlatOptimizer& optimizer,
                         const TrainerProgress& progress, const nlohmann::json& config);
void write_training_index(const std::string& dir, const TrainingLayout& layout, const FlatOptimizer& optimizer,
                          const TransformerConfig& model_config);

// What save_training_state and write_training_index write, copied at the step into `copies`' host
// buffers, for a save written while training goes on (checkpoint.async): the layout over the copies,
// the optimizer's state and what the index lists of it, the CPU generator's state, the progress and the config. Only the tensors
// hold host memory; the copy reads nothing the training thread changes later.
struct TrainingStateCopy {
  int rank = 0;
  TrainingLayout layout;
  std::map<std::string, at::Tensor> optimizer_state;
  std::vector<OptimizerStateEntry> state_entries;
  at::Tensor cpu_rng_state;
  TrainerProgress progress;
  nlohmann::json config;
  nlohmann::json model_config;
};
TrainingStateCopy copy_training_state(HostCopies& copies, int rank, const TrainingLayout& layout, const FlatOptimizer& optimizer,
                                      const TrainerProgress& progress, const nlohmann::json& config, const TransformerConfig& model_config);
void save_training_state(const std::string& dir, const TrainingStateCopy& copy);
void write_training_index(const std::string& dir, const TrainingStateCopy& copy);

// Loads this rank's pieces into the layout's tensors and `optimizer` (built from the same config)
// and returns the progress; one load_training_checkpoint, which checks everything, fp16's loss scaler
// state included, before it changes anything, and maps the earlier release's fused parameter names
// (telling `note` when it does).
TrainerProgress load_training_state(const std::string& dir, const TrainingLayout& layout, FlatOptimizer& optimizer,
                                    const CheckpointNote& note = {});

// The model alone, for generation: rebuilds the Transformer from the index's model config (a
// checkpoint of the earlier fused names maps as for training).
Transformer load_model(const std::string& dir);
// Whether the checkpoint in `dir` holds every parameter of the model its metadata describes, with
// its shape, and no other, reading no weights.
void check_model(const std::string& dir);

}  // namespace dtrain

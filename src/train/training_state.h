// What a checkpoint of a training run holds, and how it goes back. Tensors are sharded
// (ckpt/sharded_checkpoint.h): each rank writes the pieces it owns into shard-<rank>.safetensors and
// index.json maps every global tensor to them — "model/<name>" for each parameter (frozen ones
// included), "optimizer/<state>/<name>" for the optimizer state of each trainable parameter (exp_avg,
// exp_avg_sq; momentum_buffer) and "optimizer/step"; the index's metadata carries the model config.
// Beside them rank 0 writes rng.safetensors, trainer_state.json (step, data position, schedule, guard
// counters, precision and fp16 loss scaler) and config.json (the run's resolved config).
//
// Every tensor is stored by its global name, whatever layout saved it, and each rank loads the pieces
// it holds now: a checkpoint saved at one data-parallel size and ZeRO stage resumes at any other.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "data/micro_batch_stream.h"
#include "model/transformer.h"
#include "optim/flat_optimizer.h"
#include "parallel/zero/bucket_shards.h"

namespace dtrain {

struct TrainerProgress {
  int64_t step = 0;  // optimizer steps finished
  DataPosition data;
  int64_t skipped_steps = 0;
  double tokens_seen = 0;
  double lr_scale = 1;    // the factor rollbacks after a divergence have lowered the learning rate by
  int64_t rollbacks = 0;
  std::string precision = "fp32";  // what the run computed in: fp32, bf16 or fp16 (the weights are fp32 in every case)
  nlohmann::json loss_scaler;      // fp16's loss scaler state; null in other precisions
};

// Where this rank's trainable parameters and optimizer state live, as pieces of the flat buffer
// (FlatParameters' order): all it holds, which a load fills, and the part of that it writes, so that
// across the ranks every element is written exactly once.
struct StateLayout {
  std::vector<FlatEntry> entries;  // the trainable parameters in flat order: names, offsets, shapes
  at::Tensor params;               // the local tensor the parameter pieces live in (the flat buffer, or a ZeRO-3 shard)
  std::vector<FlatPiece> params_held, params_written;
  std::vector<FlatPiece> state_held, state_written;  // in the optimizer's flat state tensors

  // Data parallelism's: `shards` gives this rank 1/dp of every bucket. The parameters (ZeRO-3, in
  // `params`, the shard) and the optimizer state (ZeRO-1 to 3) are held as those pieces end to end,
  // anything else whole; every rank writes its pieces of each, so at stage 0 too the ranks share
  // the writing. `writes` is false on all but the first replica of a hybrid-sharded group.
  static StateLayout data_parallel(FlatParameters& flat, const at::Tensor& params, const BucketShards& shards, bool params_sharded,
                                   bool state_sharded, bool writes);
};

// Every rank writes its pieces into `dir`; rank 0 writes what is replicated (frozen parameters, the
// step count, rng, progress, config). Then, once all have written, rank 0 calls write_training_index.
void save_training_state(const std::string& dir, int rank, Transformer& model, const FlatOptimizer& optimizer,
                         const StateLayout& layout, const TrainerProgress& progress, const nlohmann::json& config);
void write_training_index(const std::string& dir, Transformer& model, const FlatOptimizer& optimizer, const StateLayout& layout);

// Loads this rank's pieces into `model` and `optimizer` (already built from the same config) and
// returns the progress. Everything is checked against the model, the optimizer and the manifest
// before anything is changed; throws naming the checkpoint file at fault and the entry that does not fit.
TrainerProgress load_training_state(const std::string& dir, Transformer& model, FlatOptimizer& optimizer, const StateLayout& layout);

// Every parameter, whole, by name.
std::map<std::string, at::Tensor> read_parameters(const std::string& dir);

// The model alone, for generation: rebuilds the Transformer from the index's model config.
Transformer load_model(const std::string& dir);

}  // namespace dtrain

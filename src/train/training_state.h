// What a checkpoint of a data-parallel run holds, and how it goes back: model.safetensors (every
// parameter by name, frozen ones included, with the model config as metadata), optimizer.safetensors
// (the flat optimizer state), rng.safetensors, trainer_state.json (step, data position, schedule,
// guard counters, precision and fp16 loss scaler) and config.json (the run's resolved config, which `dtrain generate` reads).
// Replicated state is written by rank 0 alone; sharded strategies add per-rank files beside these.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "data/micro_batch_stream.h"
#include "model/transformer.h"
#include "optim/flat_optimizer.h"

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

// `optimizer_state` is FlatOptimizer::state(), taken on every rank (a sharded optimizer gathers it);
// rank 0 writes.
void save_training_state(const std::string& dir, int rank, Transformer& model,
                         const std::map<std::string, at::Tensor>& optimizer_state, const TrainerProgress& progress,
                         const nlohmann::json& config);

// Loads into `model` and `optimizer` (already built from the same config) and returns the progress.
// Everything is checked against the model and the manifest before anything is changed; throws
// naming the checkpoint file at fault and the entry that does not fit.
TrainerProgress load_training_state(const std::string& dir, Transformer& model, FlatOptimizer& optimizer);

// The model alone, for generation: rebuilds the Transformer from model.safetensors' metadata.
Transformer load_model(const std::string& dir);

}  // namespace dtrain

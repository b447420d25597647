// A training run's checkpoint as a whole: which tensors it holds under which global names, which rank
// writes which piece of them, and what lies beside them. Saving and loading go through here in one
// call each, so the format (manifest, index, pieces, progress, rng) has one owner.
//
// Tensors are sharded (ckpt/sharded_checkpoint.h), each stored by its global name whatever layout
// saved it, so a checkpoint saved under one layout resumes under any other:
//   "model/<parameter>"              every parameter, frozen ones included;
//   "optimizer/<state>/<parameter>"  each per-parameter state tensor (AdamW's exp_avg and exp_avg_sq,
//                                    SGD's momentum_buffer) of each trained parameter;
//   "optimizer/<state>"              each scalar state (AdamW's step count).
// The index's metadata carries the model's config ("model_config"). Beside them the rank at
// coordinate 0 of every mesh dim writes rng.safetensors (the CPU generator), trainer_state.json
// (ckpt/trainer_progress.h) and config.json (the run's resolved config).
//
// What a rank holds is given as placements (parallel/placement.h): every parameter's ParamSpec, from
// the config and so the same on every rank, and the pieces this rank holds of it and of its optimizer
// state, each mapped to where it lives in a local flat tensor. A rank writes a piece exactly when it
// sits at coordinate 0 of every mesh dim the piece is replicated over, so each element is written once.
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/sharded_checkpoint.h"
#include "ckpt/trainer_progress.h"
#include "parallel/placement.h"

namespace dtrain {

// numel(piece) elements of a piece, kept from `local_offset` of a flat local tensor.
struct PlacedPiece {
  LocalPiece piece;
  int64_t local_offset = 0;
};

// One parameter as this rank holds it, with its optimizer state when it is trained.
struct HeldParameter {
  ParamSpec spec;                    // the parameter: its global name, shape, dtype and placements
  at::Tensor local;                  // one dim: the tensor its pieces live in (undefined when it holds none)
  std::vector<PlacedPiece> pieces;   // this rank's pieces of it, in `local`
  bool trained = false;              // it has optimizer state
  std::vector<std::pair<std::string, Placement>> state_placements;  // trained: its optimizer state's placements
  std::vector<PlacedPiece> state_pieces;  // trained: this rank's pieces of its state, in each per-parameter state tensor
};

// What a rank holds of the model and its optimizer state.
struct TrainingLayout {
  std::vector<MeshCoordinate> coords;     // this rank's place on the mesh: which pieces it writes
  std::vector<HeldParameter> parameters;  // every parameter of the model, frozen ones included
};

// One tensor of the optimizer's state, as the index lists it.
struct OptimizerStateEntry {
  std::string name;
  at::ScalarType dtype;
  bool per_parameter;  // a flat tensor laid out like the trained parameters' pieces; otherwise a scalar
};

// Whether this rank writes a piece of parameter `p`, and a piece of the optimizer's per-parameter
// state tensors (flat, over the trained parameters' state pieces, all placed alike): a copy of the
// state for a later save (train/training_state.h) takes only those. What a rank holds alike with
// others, one of them writes; an undefined local tensor stands for one this rank does not write.
bool writes_parameter(const HeldParameter& p, const TrainingLayout& layout);
bool writes_optimizer_state(const TrainingLayout& layout);

// Every rank: writes the pieces it writes of every parameter and of each state tensor of
// `optimizer_state` (per-parameter ones flat, in the layout's state pieces; scalars 0-d) into its
// shard; the rank at coordinate 0 also writes the scalars, rng (`cpu_rng_state`: the CPU generator's
// state taken with the rest, which a save written later than the step must not read afresh),
// trainer_state.json (`progress` with config's scheduler) and config.json. Rank 0 then calls
// write_training_checkpoint_index, once all have written.
void save_training_checkpoint(const std::string& dir, int rank, const TrainingLayout& layout,
                              const std::map<std::string, at::Tensor>& optimizer_state, const TrainerProgress& progress,
                              const nlohmann::json& config, const at::Tensor& cpu_rng_state);
void write_training_checkpoint_index(const std::string& dir, const TrainingLayout& layout, const std::vector<OptimizerStateEntry>& optimizer_state,
                          const nlohmann::json& model_config);

// What only the caller of a load can judge, checked with the rest before anything changes (the loss
// scaler's state, which optim's format is).
using CheckpointCheck = std::function<void(const ShardedCheckpointReader& ckpt, const TrainerProgress& progress)>;

// Loads this rank's pieces of a checkpoint into the layout's local tensors and `optimizer_state`
// (its per-parameter tensors filled in place, its scalars replaced), restores the CPU generator and
// returns the progress. Everything is checked first — the index against its shard files, the
// progress against the manifest, then `check`, every tensor against the layout and the optimizer's,
// the rng — and only then is anything read, in one pass over the pieces; throws naming the
// checkpoint file at fault and the entry that does not fit. A checkpoint of the release that fused
// q/k/v and gate/up loads, its tensors mapped (ckpt/earlier_parameter_names.h), and `note` (when
// given) is told so in a line to log.
using CheckpointNote = std::function<void(const std::string& line)>;
TrainerProgress load_training_checkpoint(const std::string& dir, const TrainingLayout& layout,
                                         std::map<std::string, at::Tensor>& optimizer_state, const CheckpointCheck& check,
                                         const CheckpointNote& note = {});

// The model's config as the index's metadata records it; throws naming the index when it has none.
const nlohmann::json& model_config_of(const ShardedCheckpointReader& ckpt);
// The parameters alone (generation, export), once the index holds every one of `parameters` with its
// shape and dtype (or under its earlier name, mapped), and no other parameter.
void load_parameters(ShardedCheckpointReader& ckpt, const std::vector<HeldParameter>& parameters);

// The checks load_parameters makes before it reads a byte: every parameter of `specs` present with
// its shape and dtype, and no other, without reading any (an export must not hold the whole model).
void check_parameters(const ShardedCheckpointReader& ckpt, const std::vector<ParamSpec>& specs);
// Every parameter, whole, by the name the checkpoint stores it under.
std::map<std::string, at::Tensor> read_parameters(const std::string& dir);

}  // namespace dtrain

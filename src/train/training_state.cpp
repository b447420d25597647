#include "train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

#include "model/parameter_shapes.h"
#include "optim/loss_scaler.h"

namespace dtrain {

namespace {

using Placements = std::vector<std::pair<std::string, Placement>>;

// Replicated over every rank that holds a copy, or ZeRO's flat shard over dp_shard x cp (the group
// its buckets are cut over) and replicated over hybrid sharding's replicas; after what model
// parallelism placed (`model`), and replicated over tp unless it cut the tensor there.
Placements data_parallel(bool sharded, const Placements& model) {
  const Placement over = sharded ? Placement::flat_shard() : Placement::replicate();
  Placements out = model;
  for (const auto& dim : Placements{{"dp_replicate", Placement::replicate()}, {"dp_shard", over}, {"cp", over}, {"tp", Placement::replicate()}})
    if (std::none_of(model.begin(), model.end(), [&](const auto& m) { return m.first == dim.first; })) out.push_back(dim);
  return out;
}

// Per trained parameter, its parts among this rank's ZeRO pieces: each a flat range of its local
// box, at its place in the rank's shard. Entries and pieces both lie in the flat buffer without
// overlapping, so one pass over both in flat order finds every part.
std::map<std::string, std::vector<PlacedPiece>> zero_pieces(const std::vector<FlatEntry>& entries, const std::map<std::string, LocalPiece>& boxes,
                                                            const BucketShards& shards) {
  std::vector<const FlatEntry*> by_offset;
  for (const FlatEntry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const FlatEntry* a, const FlatEntry* b) { return a->offset < b->offset; });
  std::vector<const ShardPiece*> owned;
  for (const ShardPiece& p : shards.pieces())
    if (p.local > 0) owned.push_back(&p);
  std::sort(owned.begin(), owned.end(), [](const ShardPiece* a, const ShardPiece* b) { return a->begin < b->begin; });
  std::map<std::string, std::vector<PlacedPiece>> out;
  size_t first = 0;
  for (const FlatEntry* e : by_offset) {
    const int64_t end = e->offset + e->numel;
    while (first < owned.size() && owned[first]->begin + owned[first]->local <= e->offset) ++first;
    for (size_t k = first; k < owned.size() && owned[k]->begin < end; ++k) {
      const ShardPiece& p = *owned[k];
      const int64_t from = std::max(p.begin, e->offset), to = std::min(p.begin + p.local, end);
      if (from < to) out[e->name].push_back({narrow(boxes.at(e->name), from - e->offset, to - e->offset), p.shard_offset + (from - p.begin)});
    }
  }
  return out;
}

// A parameter held where the model keeps it: its box of the tensor (the whole of it unless model
// parallelism cut it), all of its elements.
HeldParameter held_as_is(const ParamSpec& spec, const at::Tensor& parameter, const std::vector<MeshCoordinate>& coords) {
  HeldParameter p;
  p.spec = spec;
  p.local = parameter.detach().view({-1});
  p.pieces = {{*local_box(spec, coords), 0}};
  return p;
}

std::string shape_text(const std::vector<int64_t>& shape) { return c10::str(at::IntArrayRef(shape)); }

// The model's parameters by name, each checked against what parameter_shapes(config) says of it, cut
// as `model_placements` say for a rank at `coords`; those the placements leave to other pipeline
// stages the model must not hold.
std::map<std::string, at::Tensor> parameters_as_configured(const TransformerConfig& config, Transformer& model,
                                                           const ModelPlacements& model_placements = {},
                                                           const std::vector<MeshCoordinate>& coords = {}) {
  std::map<std::string, at::Tensor> out;
  for (auto& item : model->named_parameters()) out[item.key()] = item.value();
  size_t held = 0;
  for (const ParameterShape& s : parameter_shapes(config)) {
    const auto placed = model_placements.find(s.name);
    const ParamSpec spec{s.name, s.shape, at::kFloat, placed == model_placements.end() ? Placements{} : placed->second};
    const std::optional<LocalPiece> box = local_box(spec, coords);
    auto it = out.find(s.name);
    if (!box) {
      if (it != out.end()) throw std::logic_error("the model holds parameter '" + s.name + "', which its placements leave to another stage");
      continue;
    }
    if (it == out.end()) throw std::logic_error("the model lacks parameter '" + s.name + "', which its config describes");
    ++held;
    if (it->second.sizes().vec() != box->box.size)
      throw std::logic_error("parameter '" + s.name + "' has shape " + shape_text(it->second.sizes().vec()) + ", its config and placements say " +
                             shape_text(box->box.size));
  }
  if (held != out.size()) throw std::logic_error("the model holds parameters its config does not describe");
  return out;
}

}  // namespace

TrainingLayout data_parallel_layout(const TransformerConfig& config, Transformer& model, const FlatParameters& flat, const at::Tensor& params,
                                    const BucketShards& shards, int zero_stage, const std::vector<MeshCoordinate>& coords,
                                    const ModelPlacements& model_placements, const std::function<bool(const std::string&)>& frozen,
                                    const std::function<bool(const std::string&)>& kept_whole) {
  const std::map<std::string, at::Tensor> parameters = parameters_as_configured(config, model, model_placements, coords);
  std::map<std::string, const FlatEntry*> trained;
  for (const FlatEntry& e : flat.entries()) trained[e.name] = &e;
  std::map<std::string, LocalPiece> boxes;  // each trained parameter's local box: what its flat ranges are cut from
  TrainingLayout layout{coords, {}};
  for (const ParameterShape& s : parameter_shapes(config)) {
    const auto placed = model_placements.find(s.name);
    const Placements& model_placed = placed == model_placements.end() ? Placements{} : placed->second;
    const int stage = kept_whole && kept_whole(s.name) ? 0 : zero_stage;  // the stage that shards this parameter
    const auto held = parameters.find(s.name);
    if (held == parameters.end()) {  // another stage's: described, with no piece here
      HeldParameter p;
      p.trained = !frozen || !frozen(s.name);
      p.spec = ParamSpec{s.name, s.shape, at::kFloat, data_parallel(p.trained && stage == 3, model_placed)};
      if (p.trained) p.state_placements = data_parallel(stage >= 1, model_placed);
      layout.parameters.push_back(std::move(p));
      continue;
    }
    const at::Tensor& tensor = held->second;
    const auto entry = trained.find(s.name);
    ParamSpec spec{s.name, s.shape, tensor.scalar_type(), data_parallel(entry != trained.end() && stage == 3, model_placed)};
    if (entry == trained.end()) {
      layout.parameters.push_back(held_as_is(spec, tensor, coords));
      continue;
    }
    HeldParameter p;
    p.spec = std::move(spec);
    p.local = params;
    p.trained = true;
    p.state_placements = data_parallel(stage >= 1, model_placed);
    boxes[s.name] = *local_box(p.spec, coords);
    if (zero_stage < 3) p.pieces = {{boxes[s.name], entry->second->offset}};
    if (zero_stage < 1) p.state_pieces = p.pieces;
    layout.parameters.push_back(std::move(p));
  }
  if (zero_stage >= 1) {
    auto pieces = zero_pieces(flat.entries(), boxes, shards);
    for (HeldParameter& p : layout.parameters) {
      if (!p.trained) continue;
      p.state_pieces = pieces[p.spec.name];
      // Kept whole: its bucket's one piece is all of it, at its place in the shard.
      if (kept_whole && kept_whole(p.spec.name) && !p.state_pieces.empty()) p.state_pieces = {{boxes[p.spec.name], p.state_pieces.front().local_offset}};
      if (zero_stage == 3) p.pieces = p.state_pieces;
    }
  }
  return layout;
}

namespace {

std::vector<OptimizerStateEntry> state_entries(const FlatOptimizer& optimizer) {
  std::vector<OptimizerStateEntry> out;
  for (const auto& s : optimizer.state_entries()) out.push_back({s.name, s.dtype, s.flat});
  return out;
}

}  // namespace

void save_training_state(const std::string& dir, int rank, const TrainingLayout& layout, const FlatOptimizer& optimizer,
                         const TrainerProgress& progress, const nlohmann::json& config) {
  save_training_checkpoint(dir, rank, layout, optimizer.state(), progress, config, at::detail::getDefaultCPUGenerator().get_state());
}

void write_training_index(const std::string& dir, const TrainingLayout& layout, const FlatOptimizer& optimizer,
                          const TransformerConfig& model_config) {
  write_training_checkpoint_index(dir, layout, state_entries(optimizer), to_json(model_config));
}

TrainingStateCopy copy_training_state(HostCopies& copies, int rank, const TrainingLayout& layout, const FlatOptimizer& optimizer,
                                      const TrainerProgress& progress, const nlohmann::json& config, const TransformerConfig& model_config) {
  copies.begin();
  TrainingStateCopy out{rank, layout, {}, state_entries(optimizer), at::detail::getDefaultCPUGenerator().get_state(),
                        progress, config, to_json(model_config)};
  // Only what this rank writes: under data parallelism the replicas' copies would go unread.
  for (HeldParameter& p : out.layout.parameters)
    p.local = p.local.defined() && writes_parameter(p, layout) ? copies.copy(p.local) : at::Tensor();
  const bool writes_state = writes_optimizer_state(layout);
  for (const auto& [name, t] : optimizer.state()) out.optimizer_state[name] = t.dim() == 0 || writes_state ? copies.copy(t) : at::Tensor();
  return out;
}

void save_training_state(const std::string& dir, const TrainingStateCopy& copy) {
  save_training_checkpoint(dir, copy.rank, copy.layout, copy.optimizer_state, copy.progress, copy.config, copy.cpu_rng_state);
}

void write_training_index(const std::string& dir, const TrainingStateCopy& copy) {
  write_training_checkpoint_index(dir, copy.layout, copy.state_entries, copy.model_config);
}

TrainerProgress load_training_state(const std::string& dir, const TrainingLayout& layout, FlatOptimizer& optimizer, const CheckpointNote& note) {
  std::map<std::string, at::Tensor> state = optimizer.state();
  // The loss scaler's state is optim's format: checked here, with everything else, before anything changes.
  const auto check = [&dir](const ShardedCheckpointReader&, const TrainerProgress& p) {
    if (p.loss_scaler.is_null()) return;
    try {
      LossScaler(LossScalerOptions{}).load_state(p.loss_scaler);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error("checkpoint file '" + dir + "/" + kTrainerStateFile + "' has an invalid 'loss_scaler' (" + e.what() + ")");
    }
  };
  const TrainerProgress progress = load_training_checkpoint(dir, layout, state, check, note);
  optimizer.load_state(state);
  return progress;
}

Transformer load_model(const std::string& dir) {
  ShardedCheckpointReader ckpt(dir);
  const TransformerConfig config = transformer_config_from_json(model_config_of(ckpt));
  Transformer model(config, 0);
  // One process holding every parameter whole.
  const std::map<std::string, at::Tensor> parameters = parameters_as_configured(config, model);
  std::vector<HeldParameter> held;
  for (const ParameterShape& s : parameter_shapes(config)) {
    const at::Tensor& tensor = parameters.at(s.name);
    held.push_back(held_as_is({s.name, s.shape, tensor.scalar_type(), {}}, tensor, {}));
  }
  load_parameters(ckpt, held);
  return model;
}

void check_model(const std::string& dir) {
  ShardedCheckpointReader ckpt(dir);
  std::vector<ParamSpec> specs;
  for (ParameterShape& s : parameter_shapes(transformer_config_from_json(model_config_of(ckpt)))) specs.push_back({s.name, s.shape});
  check_parameters(ckpt, specs);
}

}  // namespace dtrain

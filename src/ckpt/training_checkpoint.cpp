#include "ckpt/training_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <stdexcept>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/earlier_parameter_names.h"
#include "ckpt/safetensors.h"

namespace dtrain {

namespace {

const std::string kModel = "model/", kOptimizer = "optimizer/";
std::string model_key(const std::string& name) { return kModel + name; }
std::string state_key(const std::string& state, const std::string& name) { return kOptimizer + state + "/" + name; }
std::string scalar_key(const std::string& state) { return kOptimizer + state; }
bool is_parameter(const std::string& key) { return key.rfind(kModel, 0) == 0; }

// The rank at coordinate 0 of every mesh dim: the one that writes what every rank holds alike.
bool at_origin(const std::vector<MeshCoordinate>& coords) {
  for (const auto& c : coords)
    if (c.coord != 0) return false;
  return true;
}

std::vector<OptimizerStateEntry> entries_of(const std::map<std::string, at::Tensor>& state) {
  std::vector<OptimizerStateEntry> out;
  for (const auto& [name, t] : state) out.push_back({name, t.scalar_type(), t.dim() != 0});
  return out;
}

// `placements` over the mesh dims of more than one rank (`coords` gives their sizes), as the index
// records them; a tensor held whole on a world of one has none.
std::vector<SavedPlacement> saved_placements(const std::vector<std::pair<std::string, Placement>>& placements,
                                             const std::vector<MeshCoordinate>& coords) {
  std::vector<SavedPlacement> out;
  for (const auto& [dim, placement] : placements)
    for (const MeshCoordinate& c : coords)
      if (c.dim == dim && c.size > 1) out.push_back({dim, c.size, placement});
  return out;
}

// What the checkpoint must hold for this model and optimizer: every parameter, and each
// per-parameter state tensor of each trained one, each scalar state once (replicated on every
// rank); each with its placements on a mesh of `coords`' sizes.
std::map<std::string, GlobalTensor> expected_tensors(const std::vector<HeldParameter>& parameters,
                                                     const std::vector<OptimizerStateEntry>& state,
                                                     const std::vector<MeshCoordinate>& coords = {}) {
  std::map<std::string, GlobalTensor> out;
  for (const HeldParameter& p : parameters)
    out[model_key(p.spec.name)] = {p.spec.shape, p.spec.dtype, saved_placements(p.spec.placements, coords)};
  std::vector<std::pair<std::string, Placement>> everywhere;
  for (const MeshCoordinate& c : coords) everywhere.emplace_back(c.dim, Placement::replicate());
  for (const auto& s : state) {
    if (!s.per_parameter) {
      out[scalar_key(s.name)] = {{}, s.dtype, saved_placements(everywhere, coords)};
      continue;
    }
    for (const HeldParameter& p : parameters)
      if (p.trained) out[state_key(s.name, p.spec.name)] = {p.spec.shape, s.dtype, saved_placements(p.state_placements, coords)};
  }
  return out;
}

// Every tensor of `expected` present with its shape and dtype, and nothing else (of the parameters
// alone with `parameters_only`): a checkpoint of another model (or an edited one) is refused before
// anything changes. A tensor the checkpoint holds under its earlier name (ckpt/earlier_parameter_names.h)
// is present when the earlier tensor is, with the shape its parts add up to; returns those tensors.
EarlierNames check_tensors(const ShardedCheckpointReader& ckpt, const std::map<std::string, GlobalTensor>& wanted, bool parameters_only) {
  const std::string& index = ckpt.index_path();
  EarlierNames earlier = earlier_names(wanted, ckpt.tensors());
  const std::map<std::string, GlobalTensor> expected = as_stored(wanted, earlier);
  for (const auto& [name, want] : expected) {
    const bool is_param = is_parameter(name);
    const std::string what = is_param ? "parameter '" + name.substr(kModel.size()) + "'"
                                      : "optimizer state '" + name.substr(kOptimizer.size()) + "'";
    auto it = ckpt.tensors().find(name);
    if (it == ckpt.tensors().end())
      throw std::runtime_error(index + " has no " + what + (is_param ? "" : " (saved by another optimizer type, or with other parameters frozen?)"));
    if (it->second.shape != want.shape)
      throw std::runtime_error(index + ": " + what + " has shape " + c10::str(at::IntArrayRef(it->second.shape)) + ", the model expects " +
                               c10::str(at::IntArrayRef(want.shape)));
    if (it->second.dtype != want.dtype)
      throw std::runtime_error(index + ": " + what + " has dtype " + c10::toString(it->second.dtype) + ", the model expects " +
                               c10::toString(want.dtype));
  }
  for (const auto& [name, t] : ckpt.tensors())
    if (!expected.count(name) && (is_parameter(name) || !parameters_only))
      throw std::runtime_error(index + " has a tensor '" + name + "' this model and optimizer do not have" +
                               (is_parameter(name) ? "" : " (saved by another optimizer type, or with other parameters frozen?)"));
  return earlier;
}

// Reads `c` from the checkpoint, from the earlier tensor it is part of when it has one: the same
// piece with its rows moved to where the part lies there.
void read_chunk(ShardedCheckpointReader& ckpt, const EarlierNames& earlier, const std::string& tensor, const LocalPiece& piece, at::Tensor local) {
  auto source = earlier.sources.find(tensor);
  if (source == earlier.sources.end()) return ckpt.read(tensor, piece, local);
  LocalPiece shifted = piece;
  shifted.box.offset.at(0) += source->second.row_offset;
  ckpt.read(source->second.tensor, shifted, local);
}

// One piece this rank holds: the global tensor, the piece, the local elements it lives in, and
// whether this rank writes it.
struct LocalChunk {
  std::string tensor;
  LocalPiece piece;
  at::Tensor local;
  bool written;
};

// `local` undefined: a tensor this rank does not write, left out of a copy for saving (writes_parameter).
void add_pieces(std::vector<LocalChunk>& out, const std::string& tensor, const std::vector<PlacedPiece>& pieces, const at::Tensor& local,
                bool written) {
  for (const PlacedPiece& p : pieces)
    if (numel(p.piece) > 0)
      out.push_back({tensor, p.piece, local.defined() ? local.narrow(0, p.local_offset, numel(p.piece)) : local, written});
}

// Whether this rank writes its pieces of `p`'s per-parameter optimizer state: every state tensor is
// placed alike (p.state_placements), whatever its name and type.
bool writes_state_of(const HeldParameter& p, const std::vector<MeshCoordinate>& coords) {
  return writes_piece({p.spec.name, p.spec.shape, p.spec.dtype, p.state_placements}, coords);
}

bool holds_piece(const std::vector<PlacedPiece>& pieces) {
  return std::any_of(pieces.begin(), pieces.end(), [](const PlacedPiece& p) { return numel(p.piece) > 0; });
}

// Per-parameter state tensors are flat (one dim); scalars 0-d. Undefined: per-parameter, not written here.
bool per_parameter(const at::Tensor& t) { return !t.defined() || t.dim() != 0; }

// Every piece of the parameters and of `state` this rank holds, in one list for saving and loading alike.
std::vector<LocalChunk> local_chunks(const TrainingLayout& layout, const std::map<std::string, at::Tensor>& state) {
  std::vector<LocalChunk> out;
  for (const HeldParameter& p : layout.parameters) {
    add_pieces(out, model_key(p.spec.name), p.pieces, p.local, writes_piece(p.spec, layout.coords));
    if (!p.trained) continue;
    for (const auto& [name, t] : state)
      if (per_parameter(t)) add_pieces(out, state_key(name, p.spec.name), p.state_pieces, t, writes_state_of(p, layout.coords));
  }
  for (const auto& [name, t] : state)
    if (!per_parameter(t)) out.push_back({scalar_key(name), whole_tensor({}), t, at_origin(layout.coords)});
  return out;
}

}  // namespace

bool writes_parameter(const HeldParameter& p, const TrainingLayout& layout) {
  return holds_piece(p.pieces) && writes_piece(p.spec, layout.coords);
}

bool writes_optimizer_state(const TrainingLayout& layout) {
  return std::any_of(layout.parameters.begin(), layout.parameters.end(), [&](const HeldParameter& p) {
    return p.trained && holds_piece(p.state_pieces) && writes_state_of(p, layout.coords);
  });
}

void save_training_checkpoint(const std::string& dir, int rank, const TrainingLayout& layout,
                              const std::map<std::string, at::Tensor>& optimizer_state, const TrainerProgress& progress,
                              const nlohmann::json& config, const at::Tensor& cpu_rng_state) {
  std::vector<TensorChunk> chunks;
  for (const LocalChunk& c : local_chunks(layout, optimizer_state))
    if (c.written) chunks.push_back({c.tensor, c.piece, c.local});
  write_shard_file(dir, rank, chunks);
  if (!at_origin(layout.coords)) return;
  write_safetensors(dir + "/rng.safetensors", {{"cpu", cpu_rng_state}});
  write_file_atomically(dir + "/" + kTrainerStateFile, trainer_state_json(progress, config["scheduler"]).dump(2));
  write_file_atomically(dir + "/config.json", config.dump(2));
}

void write_training_checkpoint_index(const std::string& dir, const TrainingLayout& layout, const std::vector<OptimizerStateEntry>& optimizer_state,
                          const nlohmann::json& model_config) {
  write_checkpoint_index(dir, expected_tensors(layout.parameters, optimizer_state, layout.coords), {{"model_config", model_config}});
}

TrainerProgress load_training_checkpoint(const std::string& dir, const TrainingLayout& layout,
                                         std::map<std::string, at::Tensor>& optimizer_state, const CheckpointCheck& check,
                                         const CheckpointNote& note) {
  ShardedCheckpointReader ckpt(dir);  // first: a checkpoint of an older format is named as such
  const TrainerProgress progress = read_trainer_progress(dir, CheckpointManager::read_manifest(dir).step);
  if (check) check(ckpt, progress);
  const EarlierNames earlier = check_tensors(ckpt, expected_tensors(layout.parameters, entries_of(optimizer_state)), false);
  if (note && !earlier.empty())
    note(dir + " holds the earlier release's fused parameter names (blocks.N.qkv, proj, fc, fc_proj): mapped to today's (q_proj, k_proj, "
         "v_proj, o_proj, gate_proj, up_proj, down_proj)");
  const auto rng = read_safetensors(dir + "/rng.safetensors");
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle on the process-wide generator
  const at::Tensor current = gen.get_state();
  auto saved = rng.tensors.find("cpu");
  if (saved == rng.tensors.end() || saved->second.sizes() != current.sizes() || saved->second.scalar_type() != current.scalar_type())
    throw std::runtime_error(dir + "/rng.safetensors does not hold a CPU generator state");
  // Everything fits: now the pieces this rank holds are read in place.
  at::NoGradGuard no_grad;
  for (const LocalChunk& c : local_chunks(layout, optimizer_state)) read_chunk(ckpt, earlier, c.tensor, c.piece, c.local);
  gen.set_state(saved->second);
  return progress;
}

const nlohmann::json& model_config_of(const ShardedCheckpointReader& ckpt) {
  if (!ckpt.metadata().contains("model_config"))
    throw std::runtime_error(ckpt.index_path() + " has no model_config metadata (not written by dtrain?)");
  return ckpt.metadata()["model_config"];
}

void check_parameters(const ShardedCheckpointReader& ckpt, const std::vector<ParamSpec>& specs) {
  std::map<std::string, GlobalTensor> wanted;
  for (const ParamSpec& s : specs) wanted[model_key(s.name)] = {s.shape, s.dtype, {}};
  check_tensors(ckpt, wanted, /*parameters_only=*/true);
}

void load_parameters(ShardedCheckpointReader& ckpt, const std::vector<HeldParameter>& parameters) {
  const EarlierNames earlier = check_tensors(ckpt, expected_tensors(parameters, {}), /*parameters_only=*/true);  // generation needs nothing else
  at::NoGradGuard no_grad;
  std::vector<LocalChunk> chunks;
  for (const HeldParameter& p : parameters) add_pieces(chunks, model_key(p.spec.name), p.pieces, p.local, false);
  for (const LocalChunk& c : chunks) read_chunk(ckpt, earlier, c.tensor, c.piece, c.local);
}

std::map<std::string, at::Tensor> read_parameters(const std::string& dir) {
  ShardedCheckpointReader ckpt(dir);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : ckpt.tensors())
    if (is_parameter(name)) out[name.substr(kModel.size())] = ckpt.read(name);
  return out;
}

}  // namespace dtrain

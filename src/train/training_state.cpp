#include "train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "model/parameter_shapes.h"
#include "optim/loss_scaler.h"

namespace dtrain {

namespace {

// A global tensor's name in the checkpoint: "model/<parameter>", "optimizer/<state>/<parameter>" or
// "optimizer/<state>" (the step count).
const std::string kModel = "model/", kOptimizer = "optimizer/";
std::string model_key(const std::string& name) { return kModel + name; }
std::string state_key(const std::string& state, const std::string& name) { return kOptimizer + state + "/" + name; }
std::string step_key(const std::string& state) { return kOptimizer + state; }
bool is_parameter(const std::string& key) { return key.rfind(kModel, 0) == 0; }

// Every parameter of the model, frozen ones included.
std::map<std::string, GlobalTensor> parameter_tensors(Transformer& model) {
  std::map<std::string, GlobalTensor> out;
  for (const auto& item : model->named_parameters()) out[model_key(item.key())] = {item.value().sizes().vec(), item.value().scalar_type()};
  return out;
}

// `fn(entry, offset in the parameter, offset in the local tensor, numel)` for each run of one
// parameter's elements among `pieces`.
template <typename Fn>
void for_each_run(const std::vector<FlatEntry>& entries, const std::vector<FlatPiece>& pieces, Fn fn) {
  for (const FlatPiece& p : pieces)
    for (const FlatEntry& e : entries) {
      const int64_t from = std::max(p.flat_offset, e.offset), to = std::min(p.flat_offset + p.numel, e.offset + e.numel);
      if (from < to) fn(e, from - e.offset, p.local_offset + (from - p.flat_offset), to - from);
    }
}

// What the checkpoint must hold for this model and optimizer: every parameter, and each flat state
// tensor per trainable parameter (a 0-d one, the step count, once).
std::map<std::string, GlobalTensor> expected_tensors(Transformer& model, const FlatOptimizer& optimizer, const StateLayout& layout) {
  std::map<std::string, GlobalTensor> out = parameter_tensors(model);
  for (const auto& s : optimizer.state_entries()) {
    if (!s.flat) {
      out[step_key(s.name)] = {{}, s.dtype};
      continue;
    }
    for (const auto& e : layout.entries) out[state_key(s.name, e.name)] = {e.param.sizes().vec(), s.dtype};
  }
  return out;
}

// Every tensor of `expected` present with its shape and dtype, and nothing else (of the parameters
// alone with `parameters_only`): a checkpoint of another model (or an edited one) is refused before
// anything changes.
void check_tensors(const ShardedCheckpointReader& ckpt, const std::string& index, const std::map<std::string, GlobalTensor>& expected,
                   bool parameters_only = false) {
  // Named first: the parameters it then lacks (blocks.0.q_proj.weight) would not say why.
  for (const auto& [name, t] : ckpt.tensors())
    if (is_parameter(name) && is_fused_qkv_weight(name.substr(kModel.size())))
      throw std::runtime_error(index + " holds parameter '" + name.substr(kModel.size()) +
                               "': it was saved by an earlier dtrain, whose blocks fused q, k and v into one qkv weight (and Llama's "
                               "gate and up into fc); this dtrain keeps them apart (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                               "down_proj) and cannot load it: resume it with the dtrain that saved it, or start a new run");
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
}

// trainer_state.json, checked field by field and against the step the manifest records.
TrainerProgress read_progress(const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  auto bad = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error("checkpoint file '" + path + "' " + what);
  };
  nlohmann::json s;
  try {
    s = read_json_file(path);
  } catch (const NotJson& e) {
    throw bad(e.what());
  }
  auto count = [&](const nlohmann::json& j, const char* key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_unsigned()) throw bad(std::string("lacks a valid '") + key + "'");
    return j[key].get<int64_t>();
  };
  auto number = [&](const char* key, double lo, double hi) {
    if (!s.is_object() || !s.contains(key) || !s[key].is_number() || !(s[key].get<double>() >= lo && s[key].get<double>() <= hi))
      throw bad(std::string("lacks a valid '") + key + "'");
    return s[key].get<double>();
  };
  TrainerProgress p;
  p.step = count(s, "step");
  const int64_t manifest_step = CheckpointManager::read_manifest(dir).step;
  if (p.step != manifest_step)
    throw bad("says step " + std::to_string(p.step) + ", the manifest says " + std::to_string(manifest_step));
  p.data = {count(s["data_position"], "epoch"), count(s["data_position"], "samples")};
  p.skipped_steps = count(s, "skipped_steps");
  p.rollbacks = count(s, "rollbacks");
  p.tokens_seen = number("tokens_seen", 0, 1e30);
  p.lr_scale = number("lr_scale", 1e-30, 1);
  if (s.contains("precision")) {  // absent from checkpoints written before mixed precision: fp32
    if (!s["precision"].is_string() || (s["precision"] != "fp32" && s["precision"] != "bf16" && s["precision"] != "fp16"))
      throw bad("has an invalid 'precision' (fp32, bf16 or fp16)");
    p.precision = s["precision"].get<std::string>();
  }
  if (s.contains("loss_scaler") && !s["loss_scaler"].is_null()) {
    try {
      LossScaler(LossScalerOptions{}).load_state(s["loss_scaler"]);
    } catch (const nlohmann::json::exception& e) {
      throw bad(std::string("has an invalid 'loss_scaler' (") + e.what() + ")");
    }
    p.loss_scaler = s["loss_scaler"];
  }
  return p;
}

}  // namespace

StateLayout StateLayout::data_parallel(FlatParameters& flat, const at::Tensor& params, const BucketShards& shards, bool params_sharded,
                                       bool state_sharded, bool writes) {
  std::vector<FlatPiece> in_shard, in_buffer;
  for (const auto& p : shards.pieces()) {
    in_shard.push_back({p.begin, p.local, p.shard_offset});
    in_buffer.push_back({p.begin, p.local, p.begin});
  }
  const std::vector<FlatPiece> whole = {{0, flat.numel(), 0}};
  StateLayout layout{flat.entries(), params, params_sharded ? in_shard : whole, {}, state_sharded ? in_shard : whole, {}};
  if (writes) {
    layout.params_written = params_sharded ? in_shard : in_buffer;
    layout.state_written = state_sharded ? in_shard : in_buffer;
  }
  return layout;
}

void save_training_state(const std::string& dir, int rank, Transformer& model, const FlatOptimizer& optimizer,
                         const StateLayout& layout, const TrainerProgress& progress, const nlohmann::json& config) {
  std::vector<TensorChunk> chunks;
  for_each_run(layout.entries, layout.params_written, [&](const FlatEntry& e, int64_t at, int64_t local, int64_t n) {
    chunks.push_back({model_key(e.name), at, layout.params.narrow(0, local, n)});
  });
  for (const auto& [state, t] : optimizer.state()) {
    if (t.dim() == 0) {
      if (rank == 0) chunks.push_back({step_key(state), 0, t.reshape({1})});
      continue;
    }
    for_each_run(layout.entries, layout.state_written, [&](const FlatEntry& e, int64_t at, int64_t local, int64_t n) {
      chunks.push_back({state_key(state, e.name), at, t.narrow(0, local, n)});
    });
  }
  if (rank == 0)
    for (const auto& item : model->named_parameters())
      if (!item.value().requires_grad()) chunks.push_back({model_key(item.key()), 0, item.value().detach().reshape({-1})});
  write_shard_file(dir, rank, chunks);
  if (rank != 0) return;
  auto gen = at::detail::getDefaultCPUGenerator();
  write_safetensors(dir + "/rng.safetensors", {{"cpu", gen.get_state()}});
  const nlohmann::json state = {{"step", progress.step},
                                {"data_position", to_json(progress.data)},
                                {"skipped_steps", progress.skipped_steps},
                                {"tokens_seen", progress.tokens_seen},
                                {"lr_scale", progress.lr_scale},
                                {"rollbacks", progress.rollbacks},
                                {"precision", progress.precision},
                                {"loss_scaler", progress.loss_scaler},
                                {"scheduler", config["scheduler"]}};
  write_file_atomically(dir + "/trainer_state.json", state.dump(2));
  write_file_atomically(dir + "/config.json", config.dump(2));
}

void write_training_index(const std::string& dir, Transformer& model, const FlatOptimizer& optimizer, const StateLayout& layout) {
  write_checkpoint_index(dir, expected_tensors(model, optimizer, layout), {{"model_config", to_json(model->config())}});
}

TrainerProgress load_training_state(const std::string& dir, Transformer& model, FlatOptimizer& optimizer, const StateLayout& layout) {
  ShardedCheckpointReader ckpt(dir);  // first: a checkpoint of an older format is named as such
  const TrainerProgress progress = read_progress(dir);
  check_tensors(ckpt, dir + "/" + kCheckpointIndexFile, expected_tensors(model, optimizer, layout));
  const auto rng = read_safetensors(dir + "/rng.safetensors");
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle on the process-wide generator
  const at::Tensor current = gen.get_state();
  auto saved = rng.tensors.find("cpu");
  if (saved == rng.tensors.end() || saved->second.sizes() != current.sizes() || saved->second.scalar_type() != current.scalar_type())
    throw std::runtime_error(dir + "/rng.safetensors does not hold a CPU generator state");
  // Everything fits: now the pieces this rank holds are read in place.
  at::NoGradGuard no_grad;
  for_each_run(layout.entries, layout.params_held, [&](const FlatEntry& e, int64_t at, int64_t local, int64_t n) {
    ckpt.read(model_key(e.name), at, layout.params.narrow(0, local, n));
  });
  for (auto& item : model->named_parameters())
    if (!item.value().requires_grad()) ckpt.read(model_key(item.key()), 0, item.value().detach().view({-1}));
  std::map<std::string, at::Tensor> state = optimizer.state();
  for (auto& [name, t] : state) {
    if (t.dim() == 0) {
      t = ckpt.read(step_key(name)).reshape({});
      continue;
    }
    for_each_run(layout.entries, layout.state_held, [&](const FlatEntry& e, int64_t at, int64_t local, int64_t n) {
      ckpt.read(state_key(name, e.name), at, t.narrow(0, local, n));
    });
  }
  optimizer.load_state(state);
  gen.set_state(saved->second);
  return progress;
}

std::map<std::string, at::Tensor> read_parameters(const std::string& dir) {
  ShardedCheckpointReader ckpt(dir);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : ckpt.tensors())
    if (is_parameter(name)) out[name.substr(kModel.size())] = ckpt.read(name);
  return out;
}

Transformer load_model(const std::string& dir) {
  ShardedCheckpointReader ckpt(dir);
  const std::string index = dir + "/" + kCheckpointIndexFile;
  if (!ckpt.metadata().contains("model_config")) throw std::runtime_error(index + " has no model_config metadata (not written by dtrain?)");
  Transformer model(transformer_config_from_json(ckpt.metadata()["model_config"]), 0);
  check_tensors(ckpt, index, parameter_tensors(model), /*parameters_only=*/true);  // generation needs nothing else
  at::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) ckpt.read(model_key(item.key()), 0, item.value().detach().view({-1}));
  return model;
}

}  // namespace dtrain

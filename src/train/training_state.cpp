#include "train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"
#include "optim/loss_scaler.h"

namespace dtrain {

namespace {

// Every parameter present with its shape and dtype, and nothing else: a file that fits another model
// (or was edited) is refused before any parameter changes.
void check_parameters(const SafetensorsFile& file, const std::string& path, Transformer& model) {
  const auto params = model->named_parameters();
  for (const auto& item : params) {
    auto it = file.tensors.find(item.key());
    if (it == file.tensors.end()) throw std::runtime_error(path + " has no parameter '" + item.key() + "'");
    if (it->second.sizes() != item.value().sizes())
      throw std::runtime_error(path + ": parameter '" + item.key() + "' has shape " + c10::str(it->second.sizes()) +
                               ", the model expects " + c10::str(item.value().sizes()));
    if (it->second.scalar_type() != item.value().scalar_type())
      throw std::runtime_error(path + ": parameter '" + item.key() + "' has dtype " + c10::toString(it->second.scalar_type()) +
                               ", the model expects " + c10::toString(item.value().scalar_type()));
  }
  for (const auto& [name, t] : file.tensors)
    if (!params.contains(name)) throw std::runtime_error(path + " has a tensor '" + name + "' the model does not have");
}

void copy_parameters(const SafetensorsFile& file, Transformer& model) {
  at::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) item.value().copy_(file.tensors.at(item.key()));
}

// trainer_state.json, checked field by field and against the step the manifest records.
TrainerProgress read_progress(const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  auto bad = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error("checkpoint file '" + path + "' " + what);
  };
  nlohmann::json s;
  try {
    s = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("is not valid JSON (") + e.what() + ")");
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
  p.data = {count(s["data_position"], "epoch"), count(s["data_position"], "offset")};
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

void save_training_state(const std::string& dir, int rank, Transformer& model,
                         const std::map<std::string, at::Tensor>& optimizer_state, const TrainerProgress& progress,
                         const nlohmann::json& config) {
  if (rank != 0) return;
  NamedTensors params;
  for (const auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
  write_safetensors(dir + "/model.safetensors", params,
                    {{"format", "dtrain"}, {"model_config", to_json(model->config()).dump()}});
  NamedTensors opt;
  for (const auto& [name, t] : optimizer_state) opt.emplace_back(name, t);
  write_safetensors(dir + "/optimizer.safetensors", opt, {{"type", config["optimizer"]["type"].get<std::string>()}});
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

TrainerProgress load_training_state(const std::string& dir, Transformer& model, FlatOptimizer& optimizer) {
  const TrainerProgress progress = read_progress(dir);
  const std::string model_path = dir + "/model.safetensors";
  const auto params = read_safetensors(model_path);
  check_parameters(params, model_path, model);
  const auto rng = read_safetensors(dir + "/rng.safetensors");
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle on the process-wide generator
  const at::Tensor current = gen.get_state();
  auto saved = rng.tensors.find("cpu");
  if (saved == rng.tensors.end() || saved->second.sizes() != current.sizes() || saved->second.scalar_type() != current.scalar_type())
    throw std::runtime_error(dir + "/rng.safetensors does not hold a CPU generator state");
  const auto opt_path = dir + "/optimizer.safetensors";
  const auto opt = read_safetensors(opt_path);
  try {
    optimizer.check_state(opt.tensors);
  } catch (const std::exception& e) {
    throw std::runtime_error(opt_path + ": " + e.what());
  }
  copy_parameters(params, model);
  optimizer.load_state(opt.tensors);
  gen.set_state(saved->second);
  return progress;
}

Transformer load_model(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  const auto file = read_safetensors(path);
  auto it = file.metadata.find("model_config");
  if (it == file.metadata.end()) throw std::runtime_error(path + " has no model_config metadata (not written by dtrain?)");
  Transformer model(transformer_config_from_json(nlohmann::json::parse(it->second)), 0);
  check_parameters(file, path, model);
  copy_parameters(file, model);
  return model;
}

}  // namespace dtrain

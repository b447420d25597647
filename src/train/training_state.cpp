#include "train/training_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include "ckpt/durable_file.h"
#include "ckpt/safetensors.h"

namespace dtrain {

namespace {

void load_parameters(const SafetensorsFile& file, const std::string& path, Transformer& model) {
  at::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    auto it = file.tensors.find(item.key());
    if (it == file.tensors.end()) throw std::runtime_error(path + " has no parameter '" + item.key() + "'");
    if (it->second.sizes() != item.value().sizes())
      throw std::runtime_error(path + ": parameter '" + item.key() + "' has shape " + c10::str(it->second.sizes()) +
                               ", the model expects " + c10::str(item.value().sizes()));
    item.value().copy_(it->second);
  }
}

}  // namespace

void save_training_state(const std::string& dir, int rank, Transformer& model, const FlatOptimizer& optimizer,
                         const TrainerProgress& progress, const nlohmann::json& config) {
  if (rank != 0) return;
  NamedTensors params;
  for (const auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
  write_safetensors(dir + "/model.safetensors", params,
                    {{"format", "dtrain"}, {"model_config", to_json(model->config()).dump()}});
  NamedTensors opt;
  for (const auto& [name, t] : optimizer.state()) opt.emplace_back(name, t);
  write_safetensors(dir + "/optimizer.safetensors", opt, {{"type", config["optimizer"]["type"].get<std::string>()}});
  auto gen = at::detail::getDefaultCPUGenerator();
  write_safetensors(dir + "/rng.safetensors", {{"cpu", gen.get_state()}});
  const nlohmann::json state = {{"step", progress.step},
                                {"data_position", to_json(progress.data)},
                                {"skipped_steps", progress.skipped_steps},
                                {"tokens_seen", progress.tokens_seen},
                                {"scheduler", config["scheduler"]}};
  write_file_atomically(dir + "/trainer_state.json", state.dump(2));
  write_file_atomically(dir + "/config.json", config.dump(2));
}

TrainerProgress load_training_state(const std::string& dir, Transformer& model, FlatOptimizer& optimizer) {
  const std::string path = dir + "/model.safetensors";
  load_parameters(read_safetensors(path), path, model);
  optimizer.load_state(read_safetensors(dir + "/optimizer.safetensors").tensors);
  const auto rng = read_safetensors(dir + "/rng.safetensors");
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle on the process-wide generator
  gen.set_state(rng.tensors.at("cpu"));
  const auto state = nlohmann::json::parse(read_text_file(dir + "/trainer_state.json"));
  TrainerProgress p;
  p.step = state.at("step");
  p.data = data_position_from_json(state.at("data_position"));
  p.skipped_steps = state.at("skipped_steps");
  p.tokens_seen = state.at("tokens_seen");
  return p;
}

Transformer load_model(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  const auto file = read_safetensors(path);
  auto it = file.metadata.find("model_config");
  if (it == file.metadata.end()) throw std::runtime_error(path + " has no model_config metadata (not written by dtrain?)");
  Transformer model(transformer_config_from_json(nlohmann::json::parse(it->second)), 0);
  load_parameters(file, path, model);
  return model;
}

}  // namespace dtrain

#include "ckpt/trainer_progress.h"

#include <stdexcept>

#include "ckpt/durable_file.h"

namespace dtrain {

nlohmann::json trainer_state_json(const TrainerProgress& progress, const nlohmann::json& scheduler) {
  return {{"step", progress.step},
          {"data_position", to_json(progress.data)},
          {"skipped_steps", progress.skipped_steps},
          {"tokens_seen", progress.tokens_seen},
          {"lr_scale", progress.lr_scale},
          {"batch_lr_scale", progress.batch_lr_scale},
          {"rollbacks", progress.rollbacks},
          {"precision", progress.precision},
          {"loss_scaler", progress.loss_scaler},
          {"scheduler", scheduler}};
}

TrainerProgress read_trainer_progress(const std::string& dir, int64_t manifest_step) {
  const std::string path = dir + "/" + kTrainerStateFile;
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
  if (p.step != manifest_step)
    throw bad("says step " + std::to_string(p.step) + ", the manifest says " + std::to_string(manifest_step));
  p.data = {count(s["data_position"], "epoch"), count(s["data_position"], "samples")};
  p.skipped_steps = count(s, "skipped_steps");
  p.rollbacks = count(s, "rollbacks");
  p.tokens_seen = number("tokens_seen", 0, 1e30);
  p.lr_scale = number("lr_scale", 1e-30, 1);
  if (s.contains("batch_lr_scale")) p.batch_lr_scale = number("batch_lr_scale", 1e-9, 1e9);  // absent before elastic.batch_policy: 1
  if (s.contains("precision")) {  // absent from checkpoints written before mixed precision: fp32
    if (!s["precision"].is_string() || (s["precision"] != "fp32" && s["precision"] != "bf16" && s["precision"] != "fp16"))
      throw bad("has an invalid 'precision' (fp32, bf16 or fp16)");
    p.precision = s["precision"].get<std::string>();
  }
  if (s.contains("loss_scaler")) p.loss_scaler = s["loss_scaler"];
  return p;
}

}  // namespace dtrain

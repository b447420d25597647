#include "train/resume_choice.h"

#include <algorithm>
#include <optional>

#include "common/number_text.h"
#include "common/printable.h"
#include "optim/flat_optimizer.h"
#include "train/batch_policy.h"
#include "train/rank_agreement.h"

namespace dtrain {

std::string choose_checkpoint(const StartPlan& plan, CheckpointManager& checkpoints, const TrainConfig& c,
                              const std::function<void(const std::string&)>& load, RankLog& log) {
  const std::string& resume = plan.resume;
  if (resume == "never") return "";
  std::vector<std::string> warnings;
  std::optional<CheckpointInfo> found;
  if (resume == "auto") {
    found = checkpoints.find_resumable(load, &warnings);
  } else {
    try {
      found = CheckpointManager::resolve(resume, load, &warnings);
    } catch (const std::invalid_argument& e) {
      throw resume_path_error(e.what());
    }
  }
  for (const auto& w : warnings) log.warn(w);
  if (!found && !warnings.empty())
    throw std::runtime_error("no checkpoint in " + (resume == "auto" ? c.checkpoint.dir : printable(resume)) +
                             " can be resumed (warnings above say why); rather than start over beside them, dtrain stops: "
                             "move them away, or set train.resume=never with train.start_over=true to remove them");
  if (!found && resume != "auto") throw ConfigError("train.resume: '" + printable(resume) + "' holds no committed checkpoint");
  return found ? found->dir : "";
}

namespace {

void warn_if_schedule_changed(const TrainConfig& c, const std::string& dir, const nlohmann::json& saved, const LrSchedule& schedule,
                              const TrainerProgress& progress, RankLog& log) {
  std::vector<std::string> changed;
  auto compare = [&](const nlohmann::json::json_pointer& key, const std::string& name) {
    if (saved.contains(key) && (!c.json.contains(key) || saved.at(key) != c.json.at(key)))
      changed.push_back(name + " " + saved.at(key).dump() + " -> " + (c.json.contains(key) ? c.json.at(key).dump() : "unset"));
  };
  compare(nlohmann::json::json_pointer("/train/steps"), "train.steps");
  compare(nlohmann::json::json_pointer("/scheduler"), "scheduler");
  // The optimizer's own rate, whether given or its type's default: `lr` may be set on one side only.
  std::optional<double> saved_lr;
  try {
    saved_lr = make_flat_optimizer(saved.at("optimizer"), at::zeros({1}))->base_lr();
  } catch (const std::exception&) {  // an optimizer this version cannot rebuild: the other keys say enough
  }
  if (saved_lr && *saved_lr != c.base_lr) changed.push_back("optimizer learning rate " + scientific(*saved_lr) + " -> " + scientific(c.base_lr));
  if (changed.empty()) return;
  std::string rates;
  try {
    const LrSchedule then(saved.at("scheduler"), saved_lr.value(), saved.at("train").at("steps").get<int64_t>());
    // The rate the optimizer uses carries the rollbacks' scale and elastic.batch_policy=scale_lr's;
    // the run that saved it trained at its own batch, without this resume's batch factor.
    const double scale = progress.lr_scale * progress.batch_lr_scale;
    rates = ": at step " + std::to_string(progress.step + 1) + " the learning rate is " + scientific(schedule.lr(progress.step) * scale) +
            " where the run that saved it would have used " + scientific(then.lr(progress.step) * scale / batch_lr_factor(c, saved));
  } catch (const std::exception&) {  // a schedule this version cannot rebuild: the keys say enough
  }
  std::string list;
  for (const auto& item : changed) list += (list.empty() ? "" : "; ") + item;
  log.warn("this run's learning-rate schedule differs from the one " + dir + " was trained with (" + list + ")" + rates);
}

void warn_if_order_changed(const TrainConfig& c, const std::string& dir, const nlohmann::json& saved, const TrainerProgress& progress,
                           RankLog& log) {
  using pointer = nlohmann::json::json_pointer;
  if (!c.shuffle || !saved.value(pointer("/data/shuffle"), true) || progress.data.samples == 0) return;
  const std::string then = saved.value(pointer("/data/shuffle_order"), std::string("randperm"));
  const std::string now = c.json["data"]["shuffle_order"].get<std::string>();
  if (then == now) return;
  log.warn(dir + " was trained in the " + then + " shuffle order and this run shuffles in the " + now +
           " order (data.shuffle_order): the rest of epoch " + std::to_string(progress.data.epoch) +
           " follows another permutation, so until it ends some samples repeat and others are skipped; "
           "set data.shuffle_order=" + then + " to keep the checkpoint's order");
}

void warn_if_model_changed(const TrainConfig& c, const std::string& dir, const nlohmann::json& saved, RankLog& log) {
  std::vector<std::string> changed;
  try {
    changed = model_changes(saved.at("model"), c.model);
  } catch (const std::exception&) {  // a model section this version cannot read: loading it checked the shapes
    return;
  }
  if (changed.empty()) return;
  std::string list;
  for (const auto& item : changed) list += (list.empty() ? "" : "; ") + item;
  log.warn("this run's model settings differ from those " + dir + " was trained with (" + list +
           "): its weights continue under this run's; set the keys back to keep the checkpoint's");
}

}  // namespace

std::vector<std::string> model_changes(const nlohmann::json& saved_model, const TransformerConfig& now) {
  const nlohmann::json then = to_json(transformer_config_from_json(saved_model)).flatten();
  const nlohmann::json current = to_json(now).flatten();
  auto name = [](std::string pointer) {
    std::replace(pointer.begin(), pointer.end(), '/', '.');
    return "model" + pointer;
  };
  std::vector<std::string> changed;
  for (const auto& [key, value] : then.items()) {
    const auto it = current.find(key);
    if (it == current.end() || *it != value)
      changed.push_back(name(key) + " " + value.dump() + " -> " + (it == current.end() ? "unset" : it->dump()));
  }
  for (const auto& [key, value] : current.items())
    if (!then.contains(key)) changed.push_back(name(key) + " unset -> " + value.dump());
  return changed;
}

void warn_of_resume_changes(const TrainConfig& c, const std::string& dir, const nlohmann::json& saved, const LrSchedule& schedule,
                            const TrainerProgress& progress, RankLog& log) {
  warn_if_schedule_changed(c, dir, saved, schedule, progress, log);
  warn_if_order_changed(c, dir, saved, progress, log);
  warn_if_model_changed(c, dir, saved, log);
}

void restore_loss_scaler(LossScaler* scaler, const TrainerProgress& progress, const MixedPrecision& precision, RankLog& log) {
  const nlohmann::json& saved = progress.loss_scaler;
  if (!scaler) {
    if (!saved.is_null()) log.info("the checkpoint's fp16 loss scale is not used: this run computes in " + precision.describe());
    return;
  }
  if (saved.is_null()) {
    log.info("the checkpoint holds no fp16 loss scale (it was saved in " + progress.precision + "); the scale starts at " +
             plain(scaler->scale()));
    return;
  }
  scaler->load_state(saved);
}

std::optional<CheckpointInfo> last_good_checkpoint(World& world, CheckpointManager& checkpoints, const std::string& why, RankLog& log) {
  const std::string dir = agree(world, "trainer/last_good/" + why, [&] {
    std::vector<std::string> warnings;
    const auto good = checkpoints.find_resumable(nullptr, &warnings, /*healthy_only=*/true);
    for (const auto& w : warnings) log.warn(w);
    return good ? good->dir : std::string();
  });
  if (dir.empty()) return std::nullopt;
  return CheckpointManager::read_manifest(dir);
}

}  // namespace dtrain

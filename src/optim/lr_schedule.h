// Learning-rate schedules, from `scheduler {type, params}`. lr(step) is the rate of optimizer step
// `step` (0-based). dtrain's own types scale optimizer.params.lr:
//   constant        {warmup_steps}
//   linear          {warmup_steps, min_ratio}               linear decay to min_ratio·lr at the end
//   cosine          {warmup_steps, min_ratio}               half-cosine decay to min_ratio·lr
//   wsd             {warmup_steps, decay_steps|decay_fraction, min_ratio}  warmup, stable, linear decay
// DeepSpeed's types keep their own params and formulas (deepspeed/runtime/lr_schedules.py):
//   WarmupLR        {warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type: log|linear}
//   WarmupDecayLR   WarmupLR's params + total_num_steps     linear decay to 0 after warmup
//   WarmupCosineLR  {total_num_steps, warmup_min_ratio, warmup_num_steps, cos_min_ratio, warmup_type}
// Where total steps are not given, train.steps is used.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

namespace dtrain {

// The scheduler.params keys a scheduler.type takes; nullopt for a type dtrain does not know.
std::optional<std::set<std::string>> schedule_param_names(const std::string& type);

class LrSchedule {
 public:
  // Throws std::invalid_argument naming scheduler.type or the scheduler.params key at fault.
  LrSchedule(const nlohmann::json& spec, double base_lr, int64_t total_steps);
  double lr(int64_t step) const { return fn_(step); }
  const std::string& type() const { return type_; }
  // The steps its warm-up lasts (0: none), and the key that sets them, for messages.
  int64_t warmup_steps() const { return warmup_; }
  const std::string& warmup_key() const { return warmup_key_; }

 private:
  std::string type_;
  int64_t warmup_ = 0;
  std::string warmup_key_;
  std::function<double(int64_t)> fn_;
};

}  // namespace dtrain

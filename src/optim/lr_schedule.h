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
#include <string>

namespace dtrain {

class LrSchedule {
 public:
  // Throws std::invalid_argument naming scheduler.type or the scheduler.params key at fault.
  LrSchedule(const nlohmann::json& spec, double base_lr, int64_t total_steps);
  double lr(int64_t step) const { return fn_(step); }
  const std::string& type() const { return type_; }

 private:
  std::string type_;
  std::function<double(int64_t)> fn_;
};

}  // namespace dtrain

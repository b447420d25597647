// fp16's loss scaler with DeepSpeed's semantics (deepspeed/runtime/fp16/loss_scaler.py): the loss
// is multiplied by the scale before backward so small gradients survive fp16, and the gradients are
// divided by it before the optimizer sees them. Dynamic scaling starts at 2^initial_scale_power,
// halves on an overflow once `hysteresis` overflows have been tolerated, and doubles after
// `window` clean steps since the last overflow. A step whose gradients overflowed is skipped; the
// caller decides overflow over all ranks together, so every rank skips the same steps.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>

namespace dtrain {

struct LossScalerOptions {
  double static_scale = 0;      // fp16.loss_scale: 0 = dynamic, else this fixed scale
  int initial_scale_power = 16;  // fp16.initial_scale_power
  int64_t window = 1000;         // fp16.loss_scale_window
  int hysteresis = 2;            // fp16.hysteresis: overflows tolerated before the scale halves
  bool consecutive_hysteresis = false;  // fp16.consecutive_hysteresis: a clean step restores hysteresis
  double min_scale = 1;          // fp16.min_loss_scale
};

// Thrown when the scale is already at min_loss_scale and the gradients overflow again.
class LossScaleAtMinimum : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options);

  double scale() const { return scale_; }
  bool dynamic() const { return options_.static_scale == 0; }
  int64_t skipped_steps() const { return skipped_; }

  // Records one step's outcome and returns whether the step must be skipped (it overflowed). A
  // static scale never changes; a dynamic one follows DeepSpeed's update_scale exactly.
  bool update(bool overflow);

  // For checkpoints: resuming restores the scale, the hysteresis left and the window's position.
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int hysteresis_left_;
  int64_t step_ = 0;
  int64_t last_overflow_step_ = -1;
  int64_t skipped_ = 0;
};

}  // namespace dtrain

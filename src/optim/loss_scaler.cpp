#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace dtrain {

LossScaler::LossScaler(const LossScalerOptions& options)
    : options_(options),
      scale_(options.static_scale > 0 ? options.static_scale : std::ldexp(1.0, options.initial_scale_power)),
      hysteresis_left_(options.hysteresis) {}

bool LossScaler::update(bool overflow) {
  if (overflow) ++skipped_;
  if (!dynamic()) return overflow;
  if (overflow) {
    if (options_.hysteresis == 1 || hysteresis_left_ == 1) {
      if (scale_ == options_.min_scale)
        throw LossScaleAtMinimum("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run. "
                                 "(fp16 loss scale " + std::to_string(scale_) + " = fp16.min_loss_scale, and step " +
                                 std::to_string(step_ + 1) + " overflowed again)");
      scale_ = std::max(scale_ / 2, options_.min_scale);
    } else {
      --hysteresis_left_;
    }
    last_overflow_step_ = step_;
  } else {
    if (options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
    if ((step_ - last_overflow_step_) % options_.window == 0) {
      if (!options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
      scale_ *= 2;
    }
  }
  ++step_;
  return overflow;
}

nlohmann::json LossScaler::state() const {
  return {{"scale", scale_}, {"hysteresis_left", hysteresis_left_}, {"step", step_},
          {"last_overflow_step", last_overflow_step_}, {"skipped_steps", skipped_}};
}

void LossScaler::load_state(const nlohmann::json& s) {
  scale_ = s.at("scale").get<double>();
  hysteresis_left_ = s.at("hysteresis_left").get<int>();
  step_ = s.at("step").get<int64_t>();
  last_overflow_step_ = s.at("last_overflow_step").get<int64_t>();
  skipped_ = s.at("skipped_steps").get<int64_t>();
}

}  // namespace dtrain

#include "train/stability_guard.h"

#include <cmath>
#include <sstream>

namespace dtrain {

StepVerdict StabilityGuard::check(double loss, double grad_norm, std::string* reason) {
  reason->clear();
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
    ++skipped_non_finite_;
    ++consecutive_unhealthy_;
    std::ostringstream s;
    s << "non-finite " << (std::isfinite(loss) ? "gradient norm" : "loss") << " (loss " << loss << ", grad norm "
      << grad_norm << "): step skipped (" << skipped_non_finite_ << " so far)";
    *reason = s.str();
    return StepVerdict::SkipNonFinite;
  }
  // The mean needs a few samples before a spike means anything.
  const bool warm = static_cast<int>(recent_.size()) >= std::min(options_.window, 5);
  if (options_.spike_factor > 0 && warm) {
    const double mean = recent_sum_ / recent_.size();
    if (loss > options_.spike_factor * mean) {
      ++spikes_;
      ++consecutive_unhealthy_;
      std::ostringstream s;
      s << "loss spike: " << loss << " > " << options_.spike_factor << " x recent mean " << mean
        << (options_.skip_spikes ? ": step skipped" : ": step applied (train.skip_spikes=false)");
      *reason = s.str();
      return options_.skip_spikes ? StepVerdict::SkipSpike : StepVerdict::Apply;
    }
  }
  consecutive_unhealthy_ = 0;
  recent_.push_back(loss);
  recent_sum_ += loss;
  if (static_cast<int>(recent_.size()) > options_.window) {
    recent_sum_ -= recent_.front();
    recent_.pop_front();
  }
  return StepVerdict::Apply;
}

void StabilityGuard::restart() {
  recent_.clear();
  recent_sum_ = 0;
  consecutive_unhealthy_ = 0;
}

}  // namespace dtrain

// The training loop's stability guard: a step whose loss or gradient norm is not finite is skipped
// and counted, and a loss spike (the loss above `spike_factor` times the mean of the recent window)
// is reported and, when asked, skipped too. Every rank sees the same all-reduced loss and norm, so
// every rank takes the same decision without talking.
//
// Skipping alone cannot rescue a run whose weights have gone bad: every later step is skipped too.
// So the guard also counts consecutive unhealthy (skipped or spiking) steps, and after
// `divergence_steps` of them declares the run diverged; the trainer then stops or rolls back.
// Spiking losses never enter the window, so a blown-up run cannot make its own level look normal.
#pragma once
#include <cstdint>
#include <deque>
#include <string>

namespace dtrain {

struct StabilityOptions {
  double spike_factor = 0;   // 0 disables spike detection; e.g. 3 = a loss above 3x the recent mean
  int window = 50;           // how many recent accepted losses the mean is taken over
  bool skip_spikes = false;  // skip the optimizer step on a spike instead of only reporting it
  int divergence_steps = 0;  // consecutive unhealthy steps that mean divergence; 0 never declares it
};

enum class StepVerdict { Apply, SkipNonFinite, SkipSpike };

class StabilityGuard {
 public:
  explicit StabilityGuard(StabilityOptions options) : options_(options) {}

  // Decides the fate of one step from its loss and pre-clip gradient norm; `reason` explains any
  // verdict other than Apply (and a reported-but-applied spike).
  StepVerdict check(double loss, double grad_norm, std::string* reason);

  // Whether the last step was finite and not a spike: what makes a checkpoint taken now healthy.
  bool last_step_healthy() const { return consecutive_unhealthy_ == 0; }
  int64_t consecutive_unhealthy() const { return consecutive_unhealthy_; }
  bool diverged() const { return options_.divergence_steps > 0 && consecutive_unhealthy_ >= options_.divergence_steps; }
  // Forgets the recent losses and the unhealthy streak: after a rollback the run starts over from
  // an earlier state. The totals below are kept.
  void restart();

  int64_t skipped_non_finite() const { return skipped_non_finite_; }
  int64_t spikes() const { return spikes_; }

 private:
  StabilityOptions options_;
  std::deque<double> recent_;   // accepted losses, newest last, at most options_.window
  double recent_sum_ = 0;       // sum of recent_
  int64_t consecutive_unhealthy_ = 0;
  int64_t skipped_non_finite_ = 0;
  int64_t spikes_ = 0;
};

}  // namespace dtrain

// The update every step executor shares once the gradients are reduced: fp16's unscaling, the
// global gradient norm over the shards, the overflow check and the loss scaler's update, the
// stability guard's verdict, clipping, and the optimizer's step on what this rank updates.
#pragma once
#include <string>

#include "train/parallelize.h"
#include "train/stability_guard.h"

namespace dtrain {

struct UpdateOutcome {
  double grad_norm = 0;
  bool overflow = false;  // fp16: the gradients overflowed, so the step was skipped
  StepVerdict verdict = StepVerdict::Apply;
  std::string reason;  // why the guard did not simply apply it
  bool applied() const { return !overflow && verdict == StepVerdict::Apply; }
};

// `loss` is the step's loss averaged over every rank, `loss_scale` the factor the gradients carry
// (fp16; 0 otherwise), `lr` the rate to step with and `clipping` the norm to clip to (0: none).
// Every rank reaches the same verdict: the norm, and so an overflow, is the same on all of them.
UpdateOutcome apply_optimizer_step(ParallelPlan& plan, StabilityGuard& guard, double loss, double loss_scale, double lr, double clipping);

}  // namespace dtrain

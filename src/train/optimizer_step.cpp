#include "train/optimizer_step.h"

#include <cmath>

#include "optim/grad_clip.h"

namespace dtrain {

UpdateOutcome apply_optimizer_step(ParallelPlan& plan, StabilityGuard& guard, double loss, double loss_scale, double lr, double clipping) {
  // This rank's reduced gradients: the whole of them, or its ZeRO-2/3 shard. Clipping, the guard and
  // the norm in the metrics all see the true gradients. Each piece counts once: whole gradients are
  // the same on every rank and are not summed, shards are summed over the group they split over
  // (the mesh's dp_shard_cp), never across the replicas of hybrid sharding (dp_replicate), the
  // slices of tensor-parallel layers over tp, and the pipeline stages' parameters over pp.
  at::Tensor& grads = plan.grad_sync->grads();
  if (plan.scaler) grads.div_(loss_scale);
  UpdateOutcome out;
  out.grad_norm = global_grad_norm(grads, plan.grad_sync->shard_group(), plan.split_gradients, plan.stage_gradients, plan.kept_whole);
  out.overflow = plan.scaler && !std::isfinite(out.grad_norm);
  if (plan.scaler) plan.scaler->update(out.overflow);
  if (!out.overflow) out.verdict = guard.check(loss, out.grad_norm, &out.reason);
  if (!out.applied()) return out;
  // The update clips the gradients as it reads them and, where the next step would only zero them,
  // zeroes them once read.
  const GradUse use{clip_factor(out.grad_norm, clipping), plan.grad_sync->zeroes_grads_only()};
  plan.optimizer->step(plan.updated_parameters(), grads, plan.decay_spans(), lr, use);
  if (use.zero_after) plan.grad_sync->grads_left_zero();
  return out;
}

}  // namespace dtrain

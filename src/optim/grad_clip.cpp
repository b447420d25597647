#include "optim/grad_clip.h"

#include <cmath>

#include "comm/collectives.h"

namespace dtrain {

double global_grad_norm(const at::Tensor& grads, Group* shard_group, const SplitElements& split) {
  at::Tensor sq = grads.norm().to(at::kDouble).pow(2).reshape({1});
  if (split.group) {
    at::Tensor split_sq = at::zeros({1}, sq.options());
    for (const Span& s : split.spans) split_sq += grads.narrow(0, s.offset, s.numel).norm().to(at::kDouble).pow(2);
    at::Tensor others = split_sq.clone();
    all_reduce(*split.group, others, ReduceOp::Sum, "grad_norm over tensor-parallel slices");
    sq += others - split_sq;
  }
  if (shard_group) all_reduce(*shard_group, sq, ReduceOp::Sum, "grad_norm");
  return std::sqrt(sq.item<double>());
}

double clip_grads(at::Tensor& grads, double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0;
  const double factor = max_norm / (norm + 1e-6);
  at::NoGradGuard no_grad;
  grads.mul_(factor);
  return factor;
}

}  // namespace dtrain

#include "parallel/zero/zero_optimizer.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

ZeroOptimizer::ZeroOptimizer(std::unique_ptr<ElementwiseOptimizer> inner, BucketShards shards, int stage,
                             std::unique_ptr<ParameterAllGather> gather)
    : inner_(std::move(inner)), shards_(std::move(shards)), stage_(stage), gather_(std::move(gather)) {}

void ZeroOptimizer::step(at::Tensor& params, const at::Tensor& grads, const Spans& decay, double lr, const GradUse& use) {
  at::NoGradGuard no_grad;
  if (stage_ == 3) {
    inner_->step(params, grads, decay, lr, use);
    return;
  }
  finish_parameter_updates();  // the last step's gathers write into the pieces updated now
  std::vector<StatePiece> mine;
  for (const auto& p : shards_.pieces()) {
    const int64_t g = stage_ == 1 ? p.begin : p.shard_offset;
    mine.push_back({params.narrow(0, p.begin, p.local), grads.narrow(0, g, p.local), spans_within(decay, p.begin, p.local),
                    p.shard_offset});
  }
  // The pieces are the part of `grads` this rank updates; the rest is zeroed apart.
  inner_->step_pieces(mine, lr, {use.scale, false});
  if (use.zero_after) grads.zero_();
  gather_->launch(params);
}

}  // namespace dtrain

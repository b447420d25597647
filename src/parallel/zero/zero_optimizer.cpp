#include "parallel/zero/zero_optimizer.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

ZeroOptimizer::ZeroOptimizer(std::unique_ptr<ElementwiseOptimizer> inner, BucketShards shards, int stage,
                             std::shared_ptr<Group> group)
    : inner_(std::move(inner)), shards_(std::move(shards)), stage_(stage), group_(std::move(group)) {}

void ZeroOptimizer::step(at::Tensor& params, const at::Tensor& grads, const Spans& decay, double lr) {
  at::NoGradGuard no_grad;
  if (stage_ == 3) {
    inner_->step(params, grads, decay, lr);
    return;
  }
  std::vector<StatePiece> mine;
  for (const auto& p : shards_.pieces()) {
    const int64_t g = stage_ == 1 ? p.begin : p.shard_offset;
    mine.push_back({params.narrow(0, p.begin, p.local), grads.narrow(0, g, p.local), spans_within(decay, p.begin, p.local),
                    p.shard_offset});
  }
  inner_->step_pieces(mine, lr);
  // Every rank's updated pieces, one all-gather per bucket. The send buffer is a copy: the all-gather
  // writes the region this rank's piece lives in.
  at::Tensor send = at::empty({0}, params.options());
  for (const auto& p : shards_.pieces()) {
    send.resize_({p.piece});
    send.narrow(0, 0, p.local).copy_(params.narrow(0, p.begin, p.local));
    send.narrow(0, p.local, p.piece - p.local).zero_();
    at::Tensor bucket = params.narrow(0, p.bucket_offset, p.bucket_numel);
    // Straight into the buffer when the bucket divides evenly: no second copy.
    at::Tensor out = p.padded_numel == p.bucket_numel ? bucket : at::empty({p.padded_numel}, params.options());
    all_gather(*group_, send, out, "zero parameter all-gather");
    if (!out.is_same(bucket)) bucket.copy_(out.narrow(0, 0, p.bucket_numel));
  }
}

}  // namespace dtrain

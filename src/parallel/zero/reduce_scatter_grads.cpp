#include "parallel/zero/reduce_scatter_grads.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

ReduceScatterGrads::ReduceScatterGrads(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options,
                                       std::vector<GradBucket> units)
    : BucketedGradSync(params, std::move(group),
                       units.empty() ? make_grad_buckets(params.entries(), params.options().dtype().itemsize(), options.bucket_bytes)
                                     : std::move(units)),
      shards_(buckets_, group_->size(), group_->rank()),
      wire_dtype_(options.wire_dtype) {
  TORCH_CHECK(!params_.grad().defined(), "ReduceScatterGrads needs parameters without a whole gradient buffer");
  shard_grad_ = at::zeros({shards_.shard_numel()}, params_.options());
  send_.resize(buckets_.size());
  received_.resize(buckets_.size());
}

void ReduceScatterGrads::zero_grad() {
  params_.zero_grad();
  accumulate_ = false;
}

CommHandle ReduceScatterGrads::reduce(int bucket) {
  at::NoGradGuard no_grad;
  const auto& b = buckets_[bucket];
  const auto& p = shards_.pieces()[bucket];
  at::Tensor send = at::empty({p.padded_numel}, params_.options().dtype(wire_dtype_.value_or(c10::typeMetaToScalarType(params_.options().dtype()))));
  for (int i = b.first_entry; i < b.first_entry + b.entries; ++i) {
    const auto& e = params_.entries()[i];
    at::Tensor slot = send.narrow(0, e.offset - b.offset, e.numel);
    at::Tensor& grad = e.param.mutable_grad();
    if (!grad.defined()) {
      slot.zero_();  // took no part in this backward
      continue;
    }
    slot.copy_(grad.reshape({-1}));
    grad.reset();
  }
  send.narrow(0, b.numel, p.padded_numel - b.numel).zero_();
  if (gradients_taken_) gradients_taken_(bucket);
  send_[bucket] = send;
  at::Tensor out = shard_grad_.narrow(0, p.shard_offset, p.piece);
  if (accumulate_ || wire_dtype_) out = received_[bucket] = at::empty({p.piece}, send.options());
  return reduce_scatter_async(*group_, send, out, ReduceOp::Avg, "zero-2:bucket " + std::to_string(bucket));
}

void ReduceScatterGrads::every_bucket_reduced() {
  accumulate_ = true;
  if (replicas_ && ends_step_) all_reduce(*replicas_, shard_grad_, ReduceOp::Avg, "hybrid shard: gradient all-reduce across replicas");
}

// On the watcher thread: each bucket owns its region of the shard, and the owner reads the shard
// only after draining.
void ReduceScatterGrads::reduced(int bucket) {
  send_[bucket].reset();
  at::Tensor& received = received_[bucket];
  if (!received.defined()) return;
  at::NoGradGuard no_grad;
  const auto& p = shards_.pieces()[bucket];
  at::Tensor mine = shard_grad_.narrow(0, p.shard_offset, p.piece);
  if (accumulate_) mine.add_(received);
  else mine.copy_(received);
  received.reset();
}

}  // namespace dtrain

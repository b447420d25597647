#include "parallel/zero/reduce_scatter_grads.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <string>

namespace dtrain {

ReduceScatterGrads::ReduceScatterGrads(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options,
                                       std::vector<GradBucket> units)
    : BucketedGradSync(params, std::move(group),
                       units.empty() ? make_grad_buckets(params.entries(), params.options().dtype().itemsize(), options.bucket_bytes)
                                     : std::move(units)),
      shards_(buckets_, group_->size(), group_->rank()),
      wire_dtype_(options.wire_dtype),
      round_numel_(std::max<int64_t>(1, options.bucket_bytes / int64_t(params.options().dtype().itemsize()))) {
  TORCH_CHECK(!params_.grad().defined(), "ReduceScatterGrads needs parameters without a whole gradient buffer");
  shard_grad_ = at::zeros({shards_.shard_numel()}, params_.options());
  rounds_.resize(buckets_.size());
}

void ReduceScatterGrads::zero_grad() {
  params_.zero_grad();
  accumulate_ = false;
}

void ReduceScatterGrads::copy_gradients(int bucket, int64_t from, int64_t numel, at::Tensor into) const {
  const auto& b = buckets_[bucket];
  for (int i = b.first_entry; i < b.first_entry + b.entries; ++i) {
    const auto& e = params_.entries()[i];
    const int64_t start = e.offset - b.offset, lo = std::max(from, start), hi = std::min(from + numel, start + e.numel);
    if (lo >= hi) continue;
    at::Tensor slot = into.narrow(0, lo - from, hi - lo);
    const at::Tensor& grad = e.param.grad();
    if (grad.defined()) slot.copy_(grad.reshape({-1}).narrow(0, lo - start, hi - lo));
    else slot.zero_();  // took no part in this backward
  }
  const int64_t padding = std::max<int64_t>(from, b.numel);
  if (padding < from + numel) into.narrow(0, padding - from, from + numel - padding).zero_();
}

ReduceScatterGrads::Round ReduceScatterGrads::launch_round(int bucket, int64_t from, int64_t numel, int rounds) {
  const auto& p = shards_.pieces()[bucket];
  const int ranks = group_->size();
  Round r;
  r.from = from;
  r.numel = numel;
  r.send = at::empty({numel * ranks}, params_.options().dtype(wire_dtype_.value_or(c10::typeMetaToScalarType(params_.options().dtype()))));
  if (rounds == 1) {
    copy_gradients(bucket, 0, p.padded_numel, r.send);
  } else {
    for (int k = 0; k < ranks; ++k) copy_gradients(bucket, k * p.piece + from, numel, r.send.narrow(0, k * numel, numel));
  }
  largest_send_numel_ = std::max(largest_send_numel_, r.send.numel());
  at::Tensor out = shard_grad_.narrow(0, p.shard_offset + from, numel);
  if (accumulate_ || wire_dtype_) out = r.received = at::empty({numel}, r.send.options());
  std::string label = "zero-2:bucket " + std::to_string(bucket);
  if (rounds > 1) label += " from " + std::to_string(from);
  r.handle = reduce_scatter_async(*group_, r.send, out, ReduceOp::Avg, label);
  return r;
}

CommHandle ReduceScatterGrads::reduce(int bucket) {
  at::NoGradGuard no_grad;
  const auto& b = buckets_[bucket];
  const auto& p = shards_.pieces()[bucket];
  const int64_t rounds = p.padded_numel > 2 * round_numel_ ? (p.padded_numel + round_numel_ - 1) / round_numel_ : 1;
  const int64_t slice = std::max<int64_t>(1, (p.piece + rounds - 1) / rounds);
  std::vector<Round>& in_flight = rounds_[bucket];
  int64_t from = 0;
  do {  // at least one round, as every rank launches one per bucket
    if (in_flight.size() == 2) {
      finish_round(bucket, in_flight.front());
      in_flight.erase(in_flight.begin());
    }
    in_flight.push_back(launch_round(bucket, from, std::min(slice, p.piece - from), int(rounds)));
    from += slice;
  } while (from < p.piece);
  for (int i = b.first_entry; i < b.first_entry + b.entries; ++i) params_.entries()[i].param.mutable_grad().reset();
  if (gradients_taken_) gradients_taken_(bucket);
  // The watcher waits for the last round; the one before it is waited for here.
  while (in_flight.size() > 1) {
    finish_round(bucket, in_flight.front());
    in_flight.erase(in_flight.begin());
  }
  return in_flight.back().handle;
}

void ReduceScatterGrads::every_bucket_reduced() {
  accumulate_ = true;
  if (replicas_ && ends_step_) all_reduce(*replicas_, shard_grad_, ReduceOp::Avg, "hybrid shard: gradient all-reduce across replicas");
}

// On the watcher thread (and on the owner's for the rounds before a bucket's last): each round owns
// its region of the shard, and the owner reads the shard only after draining.
void ReduceScatterGrads::finish_round(int bucket, Round& round) {
  round.handle.wait();
  round.send.reset();
  if (!round.received.defined()) return;
  at::NoGradGuard no_grad;
  at::Tensor mine = shard_grad_.narrow(0, shards_.pieces()[bucket].shard_offset + round.from, round.numel);
  if (accumulate_) mine.add_(round.received);
  else mine.copy_(round.received);
  round.received.reset();
}

void ReduceScatterGrads::reduced(int bucket) {
  for (Round& r : rounds_[bucket]) finish_round(bucket, r);
  rounds_[bucket].clear();
}

}  // namespace dtrain

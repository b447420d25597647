#include "parallel/zero/reduce_scatter_grads.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <string>

namespace dtrain {

ReduceScatterGrads::ReduceScatterGrads(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options,
                                       std::vector<GradBucket> units)
    : BucketedGradSync(params, std::move(group),
                       units.empty() ? make_grad_buckets(params.entries(), params.options().dtype().itemsize(), options.bucket_bytes,
                                                         options.kept_whole)
                                     : std::move(units)),
      shards_(buckets_, group_->size(), group_->rank()),
      wire_dtype_(options.wire_dtype),
      round_numel_(std::max<int64_t>(1, options.bucket_bytes / int64_t(params.options().dtype().itemsize()))) {
  TORCH_CHECK(!params_.grad().defined(), "ReduceScatterGrads needs parameters without a whole gradient buffer");
  shard_grad_ = at::zeros({shards_.shard_numel()}, params_.options());
  rounds_.resize(buckets_.size());
  fed_grads_.resize(buckets_.size());
}

void ReduceScatterGrads::feed_by_rows(const std::vector<int>& buckets, int entry, int64_t row_numel) {
  fed_by_caller(buckets);
  row_buckets_ = buckets;
  row_entry_ = entry;
  row_numel_ = row_numel;
}

void ReduceScatterGrads::feed(int bucket, at::Tensor grad) {
  TORCH_CHECK(grad.numel() == buckets_[bucket].numel, "ReduceScatterGrads::feed: bucket ", bucket, " holds ", buckets_[bucket].numel,
              " elements, its gradient ", grad.numel());
  fed_grads_[bucket] = std::move(grad);
  launch_fed(bucket);
}

void ReduceScatterGrads::feed_rows(const at::Tensor& rows, const at::Tensor& grads) {
  fed_rows_.push_back(rows.to(at::kLong));
  fed_row_grads_.push_back(grads);
}

// Each rank's rows, all-gathered (padded with row -1 to the most any rank has), then the parts of
// them this rank's pieces hold, each divided by the ranks as the reduce-scatter's average does.
void ReduceScatterGrads::add_fed_rows() {
  if (row_entry_ < 0) return;
  at::NoGradGuard no_grad;
  const auto options = shard_grad_.options();
  at::Tensor rows = fed_rows_.empty() ? at::empty({0}, options.dtype(at::kLong)) : at::cat(fed_rows_);
  at::Tensor grads = fed_row_grads_.empty() ? at::empty({0, row_numel_}, options) : at::cat(fed_row_grads_).to(options.dtype());
  fed_rows_.clear();
  fed_row_grads_.clear();
  const int ranks = group_->size();
  const at::Tensor counts = all_gather(*group_, at::full({1}, rows.numel(), options.dtype(at::kLong)), "zero-3:table rows count");
  const int64_t most = counts.max().item<int64_t>();
  if (most == 0) return;
  rows = at::cat({rows, at::full({most - rows.numel()}, -1, rows.options())});
  grads = at::cat({grads, at::zeros({most - grads.size(0), row_numel_}, options)});
  const at::Tensor all_rows = all_gather(*group_, rows, "zero-3:table rows").cpu();
  const at::Tensor all_grads = all_gather(*group_, grads.reshape({-1}), "zero-3:table row gradients").view({-1, row_numel_}).div_(ranks);
  const int64_t table = params_.entries()[size_t(row_entry_)].offset;
  const int64_t* row = all_rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < all_rows.numel(); ++i) {
    if (row[i] < 0) continue;
    const int64_t begin = table + row[i] * row_numel_, end = begin + row_numel_;
    for (int b : row_buckets_) {
      const ShardPiece& p = shards_.pieces()[size_t(b)];
      const int64_t lo = std::max(begin, p.begin), hi = std::min(end, p.begin + p.local);
      if (lo < hi) shard_grad_.narrow(0, p.shard_offset + lo - p.begin, hi - lo).add_(all_grads[i].narrow(0, lo - begin, hi - lo));
    }
  }
}

void ReduceScatterGrads::zero_grad() {
  params_.zero_grad();
  fed_rows_.clear();
  fed_row_grads_.clear();
  accumulate_ = false;
}

void ReduceScatterGrads::copy_gradients(int bucket, int64_t from, int64_t numel, at::Tensor into) const {
  const auto& b = buckets_[bucket];
  if (const at::Tensor& fed = fed_grads_[size_t(bucket)]; fed.defined()) {
    const int64_t end = std::min(from + numel, b.numel);
    if (from < end) into.narrow(0, 0, end - from).copy_(fed.reshape({-1}).narrow(0, from, end - from));
  }
  for (int i = b.first_entry; i < b.first_entry + b.entries && !fed_grads_[size_t(bucket)].defined(); ++i) {
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
  const int ranks = p.whole ? 1 : group_->size();
  Round r;
  r.from = from;
  r.numel = numel;
  r.send = at::empty({numel * ranks}, params_.options().dtype(wire_dtype_.value_or(c10::typeMetaToScalarType(params_.options().dtype()))));
  most_send_numel_in_flight_ = std::max(most_send_numel_in_flight_, send_numel_in_flight_ += r.send.numel());
  if (p.whole) {  // every rank keeps it whole: the average of every rank's gradients, in place, then into the shard
    copy_gradients(bucket, 0, numel, r.send);
    r.received = r.send;
    r.handle = all_reduce_async(*group_, r.send, ReduceOp::Avg, "zero:whole bucket " + std::to_string(bucket));
    return r;
  }
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
  const int64_t rounds = !p.whole && p.padded_numel > 2 * round_numel_ ? (p.padded_numel + round_numel_ - 1) / round_numel_ : 1;
  // At most two send buffers alive at once: this bucket's and one other's, or two of its rounds.
  wait_for_reductions(rounds == 1 ? 1 : 0);
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
  fed_grads_[size_t(bucket)].reset();
  if (gradients_taken_) gradients_taken_(bucket);
  // The watcher waits for the last round; the one before it is waited for here.
  while (in_flight.size() > 1) {
    finish_round(bucket, in_flight.front());
    in_flight.erase(in_flight.begin());
  }
  return in_flight.back().handle;
}

void ReduceScatterGrads::every_bucket_reduced() {
  add_fed_rows();
  accumulate_ = true;
  if (replicas_ && ends_step_) all_reduce(*replicas_, shard_grad_, ReduceOp::Avg, "hybrid shard: gradient all-reduce across replicas");
}

// On the watcher thread (and on the owner's for the rounds before a bucket's last): each round owns
// its region of the shard, and the owner reads the shard only after draining.
void ReduceScatterGrads::finish_round(int bucket, Round& round) {
  round.handle.wait();
  send_numel_in_flight_ -= round.send.numel();
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

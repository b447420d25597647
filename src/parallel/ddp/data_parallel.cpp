#include "parallel/ddp/data_parallel.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace dtrain {

DataParallel::DataParallel(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options)
    : params_(params), group_(std::move(group)), wire_dtype_(options.wire_dtype) {
  const auto& entries = params_.entries();
  buckets_ = make_grad_buckets(entries, params_.data().element_size(), options.bucket_bytes);
  bucket_of_entry_.resize(entries.size());
  for (int b = 0; b < int(buckets_.size()); ++b)
    for (int i = 0; i < buckets_[b].entries; ++i) bucket_of_entry_[buckets_[b].first_entry + i] = b;
  ready_in_bucket_.assign(buckets_.size(), 0);
  wire_.resize(buckets_.size());
  for (int i = 0; i < int(entries.size()); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(entries[i].param);
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_grad_ready(i);
          return outputs;
        }));
    accumulators_.push_back(std::move(acc));
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::broadcast_parameters(const std::vector<at::Tensor>& others) {
  at::NoGradGuard no_grad;
  broadcast(*group_, params_.data(), 0, "ddp:broadcast_parameters");
  for (auto t : others) {
    at::Tensor contiguous = t.contiguous();
    broadcast(*group_, contiguous, 0, "ddp:broadcast_parameters");
    if (!contiguous.is_same(t)) t.copy_(contiguous);
  }
}

void DataParallel::begin_backward() {
  next_bucket_ = 0;
  std::fill(ready_in_bucket_.begin(), ready_in_bucket_.end(), 0);
  tracker_.begin(int(buckets_.size()));
}

void DataParallel::on_grad_ready(int entry) {
  if (!sync_) return;
  tracker_.grad_ready();
  const int b = bucket_of_entry_[entry];
  if (++ready_in_bucket_[b] == buckets_[b].entries) launch_ready_buckets();
}

void DataParallel::launch_ready_buckets() {
  while (next_bucket_ < int(buckets_.size()) && ready_in_bucket_[next_bucket_] == buckets_[next_bucket_].entries)
    launch(next_bucket_++);
}

void DataParallel::launch(int bucket) {
  const auto& b = buckets_[bucket];
  tracker_.launched(bucket);
  at::Tensor grads = params_.grad().narrow(0, b.offset, b.numel);
  if (wire_dtype_) grads = wire_[bucket] = grads.to(*wire_dtype_);
  auto handle = all_reduce_async(*group_, grads, ReduceOp::Avg, "ddp:bucket " + std::to_string(bucket));
  watcher_.watch(std::move(handle), [this, bucket] { tracker_.completed(bucket); });
}

void DataParallel::finish_gradient_sync() {
  tracker_.backward_ended();
  // Parameters that took no part in this backward leave their buckets incomplete: reduce them
  // anyway (their gradient is whatever accumulated, zero if none), in order, as every rank does.
  while (next_bucket_ < int(buckets_.size())) launch(next_bucket_++);
  watcher_.drain();
  if (wire_dtype_)
    for (size_t i = 0; i < buckets_.size(); ++i) params_.grad().narrow(0, buckets_[i].offset, buckets_[i].numel).copy_(wire_[i]);
  tracker_.finished();
}

}  // namespace dtrain

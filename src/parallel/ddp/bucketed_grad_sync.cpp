#include "parallel/ddp/bucketed_grad_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace dtrain {

BucketedGradSync::BucketedGradSync(FlatParameters& params, std::shared_ptr<Group> group, std::vector<GradBucket> buckets)
    : params_(params), group_(std::move(group)), buckets_(std::move(buckets)) {
  const auto& entries = params_.entries();
  bucket_of_entry_.resize(entries.size());
  for (int b = 0; b < int(buckets_.size()); ++b)
    for (int i = 0; i < buckets_[b].entries; ++i) bucket_of_entry_[buckets_[b].first_entry + i] = b;
  ready_in_bucket_.assign(buckets_.size(), 0);
  fed_.assign(buckets_.size(), false);
  fed_launched_.assign(buckets_.size(), false);
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

BucketedGradSync::~BucketedGradSync() = default;

void BucketedGradSync::begin_backward() {
  next_bucket_ = 0;
  std::fill(ready_in_bucket_.begin(), ready_in_bucket_.end(), 0);
  std::fill(fed_launched_.begin(), fed_launched_.end(), false);
  tracker_.begin(int(buckets_.size()));
}

void BucketedGradSync::fed_by_caller(const std::vector<int>& buckets) {
  for (int b : buckets) fed_[size_t(b)] = true;
}

void BucketedGradSync::launch_fed(int bucket) {
  if (!sync_) return;
  fed_launched_[size_t(bucket)] = true;
  launch(bucket);
}

void BucketedGradSync::on_grad_ready(int entry) {
  const int b = bucket_of_entry_[entry];
  if (!sync_ || fed_[size_t(b)]) return;
  tracker_.grad_ready();
  if (++ready_in_bucket_[b] == buckets_[b].entries) launch_ready_buckets();
}

void BucketedGradSync::launch_ready_buckets() {
  for (; next_bucket_ < int(buckets_.size()); ++next_bucket_) {
    if (fed_[size_t(next_bucket_)]) continue;  // launched when handed over
    if (ready_in_bucket_[next_bucket_] != buckets_[next_bucket_].entries) break;
    launch(next_bucket_);
  }
}

void BucketedGradSync::launch(int bucket) {
  tracker_.launched(bucket);
  watcher_.watch(reduce(bucket), [this, bucket] {
    tracker_.completed(bucket);
    reduced(bucket);
  });
}

void BucketedGradSync::finish_gradient_sync() {
  tracker_.backward_ended();
  // Parameters that took no part in this backward leave their buckets incomplete: reduce them
  // anyway (their gradient is whatever accumulated, zero if none), in order, as every rank does.
  for (; next_bucket_ < int(buckets_.size()); ++next_bucket_)
    if (!fed_[size_t(next_bucket_)]) launch(next_bucket_);
  for (int b = 0; b < int(buckets_.size()); ++b)
    if (fed_[size_t(b)] && !fed_launched_[size_t(b)]) launch_fed(b);
  watcher_.drain();
  every_bucket_reduced();
  tracker_.finished();
}

}  // namespace dtrain

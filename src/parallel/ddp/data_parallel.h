// Data parallelism (DDP): every rank holds the whole model and the whole gradient, which is
// averaged across the group bucket by bucket during backward (BucketedGradSync), each bucket one
// all-reduce of a contiguous slice of the flat gradient. For gradient accumulation, set_sync(false)
// on all but the last micro-step (PyTorch's no_sync): gradients then only accumulate locally.
#pragma once
#include <optional>

#include "parallel/ddp/bucketed_grad_sync.h"

namespace dtrain {

struct DataParallelOptions {
  int64_t bucket_bytes = 25 * 1000 * 1000;  // reduce_bucket_size (DeepSpeed counts it in elements; see docs/config.md)
  // The type gradients travel in: the gradients' own, or a 16-bit type they are rounded to
  // (data_types.grad_accum_dtype), which halves the bytes sent.
  std::optional<at::ScalarType> wire_dtype;
  // Under ZeRO (stages 1 and 2 cut these buckets), the parameters every rank keeps whole: their
  // buckets hold no other (GradBucket::whole).
  KeptWhole kept_whole;
};

class DataParallel : public BucketedGradSync {
 public:
  DataParallel(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options);

  bool reduces_every_micro_batch() const override { return false; }
  void zero_grad() override {
    if (!grads_zero_) params_.zero_grad();
    grads_zero_ = false;
  }
  bool zeroes_grads_only() const override { return true; }
  void grads_left_zero() override { grads_zero_ = true; }
  at::Tensor& grads() override { return params_.grad(); }
  Group* shard_group() override { return nullptr; }

 private:
  CommHandle reduce(int bucket) override;
  void every_bucket_reduced() override;

  std::optional<at::ScalarType> wire_dtype_;
  std::vector<at::Tensor> wire_;  // per bucket, in wire_dtype_: what was sent, reduced in place, until copied back
  bool grads_zero_ = false;       // the last update left the gradients zero, and nothing has written them since
};

}  // namespace dtrain

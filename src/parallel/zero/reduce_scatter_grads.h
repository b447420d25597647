// ZeRO stage 2's gradient path: each rank keeps only its shard of the averaged gradient
// (BucketShards: 1/dp of every bucket). The parameters have no whole gradient buffer: autograd
// gives each parameter its gradient, and once a bucket's gradients are all there they are copied
// into one padded send buffer and released, and the bucket's reduce-scatter starts while backward
// goes on; the send buffer goes as soon as that finishes. So a rank holds its 1/dp shard plus the
// buckets in flight, never the whole gradient.
//
// With gradient accumulation every micro-batch is reduced (as DeepSpeed does at stage 2): keeping
// whole gradients between micro-batches would give back the memory stage 2 saves. The shard sums
// the micro-batches in the gradients' own type; data_types.grad_accum_dtype only sets the type on
// the wire.
#pragma once
#include <functional>
#include <optional>

#include "parallel/ddp/bucketed_grad_sync.h"
#include "parallel/ddp/data_parallel.h"
#include "parallel/zero/bucket_shards.h"

namespace dtrain {

class ReduceScatterGrads : public BucketedGradSync {
 public:
  // `params` built without a gradient buffer; buckets of options.bucket_bytes, or `units` (ZeRO-3's).
  ReduceScatterGrads(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options,
                     std::vector<GradBucket> units = {});
  // Hybrid sharding: `group` is one shard group, and these ranks, holding the same shard in the
  // other groups (the mesh's dp_replicate), average it once the step's last backward is reduced. A
  // group of one, without hybrid sharding, has nothing to average.
  void average_across(std::shared_ptr<Group> replicas) { replicas_ = std::move(replicas); }
  // Called with a bucket's index once its gradients are in the send buffer (ZeRO-3 frees the unit).
  void on_gradients_taken(std::function<void(int)> callback) { gradients_taken_ = std::move(callback); }

  bool reduces_every_micro_batch() const override { return true; }
  void zero_grad() override;
  at::Tensor& grads() override { return shard_grad_; }
  Group* shard_group() override { return group_.get(); }

 private:
  CommHandle reduce(int bucket) override;
  void reduced(int bucket) override;
  void every_bucket_reduced() override;

  BucketShards shards_;
  std::optional<at::ScalarType> wire_dtype_;
  at::Tensor shard_grad_;  // this rank's pieces end to end; the padding stays zero
  // Per bucket, alive while its reduce-scatter runs: what was sent, and where the result lands when
  // it cannot land in shard_grad_ directly (a later micro-batch, or a 16-bit wire type).
  std::vector<at::Tensor> send_, received_;
  bool accumulate_ = false;  // shard_grad_ holds an earlier micro-batch of this step
  std::function<void(int)> gradients_taken_;
  std::shared_ptr<Group> replicas_;
};

}  // namespace dtrain

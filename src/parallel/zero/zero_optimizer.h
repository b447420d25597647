// The sharded optimizer of ZeRO: each rank of the data-parallel group keeps the optimizer state of
// its shard alone (BucketShards: 1/dp of every gradient bucket) and updates only those parameters.
// Adam's two moments shrink from 8 bytes per parameter on every rank to 8/dp (docs/training.md,
// "ZeRO"). At stage 1 step() receives the whole parameters and the whole all-reduced gradient and
// reads its pieces of them; at stage 2 the gradient is this rank's shard, which ReduceScatterGrads
// filled. At both, ParameterAllGather then gives every rank the whole updated buffer, overlapped with
// the next forward pass. At stage
// 3 the parameters, gradients and decay mask are all this rank's shard, updated in one pass and not
// gathered: FullyShardedParameters gathers each unit when the next forward needs it.
//
// state() is this rank's shard of the state (the pieces of BucketShards end to end, padding zero);
// a checkpoint stores each piece under its parameter's name (ckpt/training_checkpoint.h), so what one
// layout saved loads under any other.
#pragma once
#include <memory>

#include "comm/collectives.h"
#include "optim/flat_optimizer.h"
#include "parallel/zero/bucket_shards.h"
#include "parallel/zero/parameter_all_gather.h"

namespace dtrain {

class ZeroOptimizer : public FlatOptimizer {
 public:
  // `inner` has state for a buffer of shards.shard_numel() elements: make_flat_optimizer with a
  // shard-sized `like`, or an NvmeOptimizer of that many elements. `stage` (1, 2 or 3) says what step() receives, as above.
  // `gather` (stages 1 and 2) brings every rank's updated pieces back after each step.
  ZeroOptimizer(std::unique_ptr<ElementwiseOptimizer> inner, BucketShards shards, int stage, std::unique_ptr<ParameterAllGather> gather);
  void step(at::Tensor& params, const at::Tensor& grads, const Spans& decay, double lr, const GradUse& use) override;
  void finish_parameter_updates() override {
    if (gather_) gather_->finish();
  }
  std::map<std::string, at::Tensor> state() const override { return inner_->state(); }
  std::vector<StateEntry> state_entries() const override { return inner_->state_entries(); }
  void load_state(const std::map<std::string, at::Tensor>& state) override { inner_->load_state(state); }
  double base_lr() const override { return inner_->base_lr(); }
  int64_t resident_bytes() const override { return inner_->resident_bytes(); }

 private:
  std::unique_ptr<ElementwiseOptimizer> inner_;
  BucketShards shards_;
  int stage_;
  std::unique_ptr<ParameterAllGather> gather_;
};

}  // namespace dtrain

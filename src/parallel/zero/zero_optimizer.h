// ZeRO stage 1 (zero_optimization.stage = 1): the optimizer state is sharded over the data-parallel
// group. Gradients are all-reduced as in plain data parallelism, so every rank holds the whole
// averaged gradient (clipping and the stability guard see it unchanged); each rank then updates
// only its shard of the flat parameters with its shard of the state, and one all-gather gives every
// rank the whole updated buffer. Adam's two moments shrink from 8 bytes per parameter on every rank
// to 8/dp (docs/training.md, "ZeRO").
//
// Checkpoints stay whole: state() gathers the shards (a collective every rank must call) and
// load_state() takes whole tensors and keeps this rank's slice, so a checkpoint written under any
// stage or data-parallel size loads under any other.
#pragma once
#include <memory>

#include "comm/collectives.h"
#include "optim/flat_optimizer.h"
#include "parallel/zero/flat_shard.h"

namespace dtrain {

class ZeroOptimizer : public FlatOptimizer {
 public:
  // `inner` steps a buffer of shard.local_len elements: make_flat_optimizer with a shard-sized `like`.
  ZeroOptimizer(std::unique_ptr<FlatOptimizer> inner, FlatShard shard, std::shared_ptr<Group> group);
  void step(at::Tensor& params, const at::Tensor& grads, const at::Tensor& decay_mask, double lr) override;
  // Whole tensors, gathered from every rank: a collective.
  std::map<std::string, at::Tensor> state() const override;
  std::map<std::string, at::Tensor> state_layout() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  double base_lr() const override { return inner_->base_lr(); }

 private:
  // `local` (this rank's local_len elements) gathered from every rank into `whole` (numel elements).
  void gather_into(const at::Tensor& local, at::Tensor& whole, const std::string& label) const;
  bool sharded(const at::Tensor& t) const { return t.dim() == 1 && t.numel() == shard_.local_len; }

  std::unique_ptr<FlatOptimizer> inner_;
  FlatShard shard_;
  std::shared_ptr<Group> group_;
};

}  // namespace dtrain

// ZeRO-Offload (zero_optimization.offload_optimizer.device "cpu" or "nvme" on a run that computes on
// an accelerator): the optimizer state of this rank's shard lives on the host, in memory or in
// NvmeOptimizer's files, and the update runs on the CPU where it is, so the accelerator keeps no
// optimizer state at all. A step copies each piece's gradients, and its parameters unless they already
// live on the host (stage 3's shard under offload_param), into host staging buffers, updates them
// there with `inner`, and copies the updated parameters back. The staging buffers are page-locked on
// CUDA so that both copies run at the bus's speed; the state itself never crosses the bus.
//
// On a CPU run the state is already where it would go, so the trainer does not use this; the test
// runs it with host tensors as the "device" ones, which exercises every copy.
#pragma once
#include <memory>

#include "optim/flat_optimizer.h"

namespace dtrain {

class HostOffloadOptimizer : public ElementwiseOptimizer {
 public:
  // `inner` steps `numel` host elements (its state indexed as the pieces' state_offset); `device` is
  // where the pieces' gradients (and parameters unless `params_on_host`) live.
  HostOffloadOptimizer(std::unique_ptr<ElementwiseOptimizer> inner, int64_t numel, at::TensorOptions options, at::Device device,
                       bool params_on_host);

  void step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) override;
  std::map<std::string, at::Tensor> state() const override { return inner_->state(); }
  std::vector<StateEntry> state_entries() const override { return inner_->state_entries(); }
  void load_state(const std::map<std::string, at::Tensor>& state) override { inner_->load_state(state); }
  double base_lr() const override { return inner_->base_lr(); }
  // On the accelerator: nothing.
  int64_t resident_bytes() const override { return 0; }
  // On the host: the state (or NVMe's buffers) and the staging buffers.
  int64_t host_bytes() const;

 private:
  std::unique_ptr<ElementwiseOptimizer> inner_;
  bool params_on_host_;
  at::Tensor params_, grads_;  // staging, indexed like the state; params_ undefined when params_on_host_
};

// Host options for state of `options`' dtype: the CPU, page-locked when `device` is CUDA's (what
// copies to and from it need to run asynchronously at full speed).
at::TensorOptions host_staging_options(at::TensorOptions options, const at::Device& device);

}  // namespace dtrain

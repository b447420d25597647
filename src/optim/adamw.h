// AdamW (Loshchilov & Hutter) over flat buffers, matching torch.optim.AdamW's arithmetic: one fused
// pass over CPU fp32 memory (optim/fused_adamw.h), PyTorch's fused multi-tensor kernel over fp32 on
// an accelerator, ATen's operations elsewhere.
#pragma once
#include "optim/flat_optimizer.h"

namespace dtrain {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// One step of AdamW over every piece at once with ATen's fused multi-tensor kernel (`_fused_adamw_`):
// a launch or two for the whole model where the element-wise path issues ~9 per run of 2^20
// elements, which on a GPU the host cannot issue as fast as the device runs them. Each piece's decay
// spans go in one call with the weight decay, the rest in another. The pieces must be contiguous
// fp32 on one device (ATen has the kernel for CPU and CUDA); the step is the count after this one.
void adamw_multi_tensor(const AdamWOptions& options, const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state,
                        int64_t step, double lr, const GradUse& use);

class AdamW : public ElementwiseRule {
 public:
  explicit AdamW(AdamWOptions options) : options_(options) {}
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  void update(const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state, int64_t step, double lr,
              const GradUse& use) override;
  double base_lr() const override { return options_.lr; }
  int64_t scratch_bytes() const override { return int64_t(denom_.defined() ? denom_.nbytes() : 0); }

 private:
  void update_fused(at::Tensor& params, const at::Tensor& grads, at::Tensor& m, at::Tensor& v, const Spans& decay, double bias1,
                    double bias2, double lr, const GradUse& use);

  AdamWOptions options_;
  at::Tensor denom_;  // ATen's path: scratch for sqrt(v)/sqrt(bias2) + eps, at most kDenomChunk elements, grown on first use
};

}  // namespace dtrain

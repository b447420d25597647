// AdamW (Loshchilov & Hutter) over flat buffers, matching torch.optim.AdamW's arithmetic: one fused
// pass over CPU fp32 memory (optim/fused_adamw.h), ATen's operations elsewhere.
#pragma once
#include "optim/flat_optimizer.h"

namespace dtrain {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

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

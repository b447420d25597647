// AdamW (Loshchilov & Hutter) over a flat buffer, matching torch.optim.AdamW's arithmetic.
#pragma once
#include "optim/flat_optimizer.h"

namespace dtrain {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW : public ElementwiseOptimizer {
 public:
  AdamW(AdamWOptions options, const at::Tensor& like);
  void step_pieces(const std::vector<StatePiece>& pieces, double lr) override;
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  double base_lr() const override { return options_.lr; }
  int64_t resident_bytes() const override { return FlatOptimizer::resident_bytes() + int64_t(denom_.nbytes()); }

 private:
  AdamWOptions options_;
  at::Tensor exp_avg_, exp_avg_sq_;
  at::Tensor denom_;  // scratch for sqrt(v)/sqrt(bias2) + eps, one chunk of kDenomChunk elements
  int64_t steps_ = 0;
};

}  // namespace dtrain

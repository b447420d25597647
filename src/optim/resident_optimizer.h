// An elementwise rule (AdamW, SGD) with its state in memory: one flat tensor per state name, the
// size of the buffer it steps (a ZeRO rank's: its shard), and the step count.
#pragma once
#include <memory>

#include "optim/flat_optimizer.h"

namespace dtrain {

class ResidentOptimizer : public ElementwiseOptimizer {
 public:
  ResidentOptimizer(std::unique_ptr<ElementwiseRule> rule, const at::Tensor& like);
  void step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) override;
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  double base_lr() const override { return rule_->base_lr(); }
  int64_t resident_bytes() const override { return FlatOptimizer::resident_bytes() + rule_->scratch_bytes(); }

 private:
  std::unique_ptr<ElementwiseRule> rule_;
  std::vector<at::Tensor> state_;  // in rule_->state_names()' order
  int64_t steps_ = 0;
};

}  // namespace dtrain

#include "optim/resident_optimizer.h"

#include "optim/optimizer_state.h"

namespace dtrain {

ResidentOptimizer::ResidentOptimizer(std::unique_ptr<ElementwiseRule> rule, const at::Tensor& like) : rule_(std::move(rule)) {
  for (size_t i = 0; i < rule_->state_names().size(); ++i) state_.push_back(at::zeros_like(like));
}

void ResidentOptimizer::step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) {
  rule_->update(pieces, state_, ++steps_, lr, use);
}

std::map<std::string, at::Tensor> ResidentOptimizer::state() const {
  std::map<std::string, at::Tensor> out = {{"step", at::scalar_tensor(steps_, at::kLong)}};
  const auto names = rule_->state_names();
  for (size_t i = 0; i < names.size(); ++i) out[names[i]] = state_[i];
  return out;
}

void ResidentOptimizer::load_state(const std::map<std::string, at::Tensor>& state) {
  const auto names = rule_->state_names();
  for (size_t i = 0; i < names.size(); ++i) restore_state_tensor(state, names[i], state_[i]);
  steps_ = state_step(state);
}

}  // namespace dtrain

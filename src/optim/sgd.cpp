#include "optim/sgd.h"

#include <ATen/core/grad_mode.h>

#include "optim/optimizer_state.h"

namespace dtrain {

Sgd::Sgd(SgdOptions options, const at::Tensor& like) : options_(options), momentum_buffer_(at::zeros_like(like)) {}

void Sgd::step_pieces(const std::vector<StatePiece>& pieces, double lr) {
  at::NoGradGuard no_grad;
  for (const auto& p : pieces) {
    at::Tensor params = p.params;
    at::Tensor d = p.grads;
    if (options_.weight_decay != 0 && !p.decay.empty()) {
      d = p.grads.clone();
      for (const Span& s : p.decay) d.narrow(0, s.offset, s.numel).add_(params.narrow(0, s.offset, s.numel), options_.weight_decay);
    }
    if (options_.momentum != 0) {
      at::Tensor buf = momentum_buffer_.narrow(0, p.state_offset, params.numel());
      if (steps_ == 0) buf.copy_(d);  // torch starts the buffer at the first gradient
      else buf.mul_(options_.momentum).add_(d, 1 - options_.dampening);
      d = options_.nesterov ? d.add(buf, options_.momentum) : buf;
    }
    params.add_(d, -lr);
  }
  ++steps_;
}

std::map<std::string, at::Tensor> Sgd::state() const {
  return {{"momentum_buffer", momentum_buffer_}, {"step", at::scalar_tensor(steps_, at::kLong)}};
}

void Sgd::load_state(const std::map<std::string, at::Tensor>& state) {
  restore_state_tensor(state, "momentum_buffer", momentum_buffer_);
  steps_ = state_step(state);
}

}  // namespace dtrain

#include "optim/sgd.h"

#include <ATen/core/grad_mode.h>

#include "optim/optimizer_state.h"

namespace dtrain {

Sgd::Sgd(SgdOptions options, const at::Tensor& like) : options_(options), momentum_buffer_(at::zeros_like(like)) {}

void Sgd::step(at::Tensor& params, const at::Tensor& grads, const at::Tensor& decay_mask, double lr) {
  at::NoGradGuard no_grad;
  at::Tensor d = options_.weight_decay != 0 ? grads.addcmul(params, decay_mask, options_.weight_decay) : grads;
  if (options_.momentum != 0) {
    if (steps_ == 0) momentum_buffer_.copy_(d);  // torch starts the buffer at the first gradient
    else momentum_buffer_.mul_(options_.momentum).add_(d, 1 - options_.dampening);
    d = options_.nesterov ? d.add(momentum_buffer_, options_.momentum) : momentum_buffer_;
  }
  params.add_(d, -lr);
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

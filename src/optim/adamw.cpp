#include "optim/adamw.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "optim/optimizer_state.h"

namespace dtrain {

AdamW::AdamW(AdamWOptions options, const at::Tensor& like)
    : options_(options), exp_avg_(at::zeros_like(like)), exp_avg_sq_(at::zeros_like(like)), denom_(at::empty_like(like)) {}

void AdamW::step(at::Tensor& params, const at::Tensor& grads, const at::Tensor& decay_mask, double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  if (options_.weight_decay != 0) params.addcmul_(params, decay_mask, -lr * options_.weight_decay);
  exp_avg_.lerp_(grads, 1 - options_.beta1);
  exp_avg_sq_.mul_(options_.beta2).addcmul_(grads, grads, 1 - options_.beta2);
  const double bias1 = 1 - std::pow(options_.beta1, double(steps_));
  const double bias2 = 1 - std::pow(options_.beta2, double(steps_));
  // denom_ is kept between steps: a fresh buffer the size of the model every step costs page faults.
  at::sqrt_out(denom_, exp_avg_sq_).mul_(1.0 / std::sqrt(bias2)).add_(options_.eps);
  params.addcdiv_(exp_avg_, denom_, -lr / bias1);
}

std::map<std::string, at::Tensor> AdamW::state() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}, {"step", at::scalar_tensor(steps_, at::kLong)}};
}

void AdamW::load_state(const std::map<std::string, at::Tensor>& state) {
  restore_state_tensor(state, "exp_avg", exp_avg_);
  restore_state_tensor(state, "exp_avg_sq", exp_avg_sq_);
  steps_ = state_step(state);
}

}  // namespace dtrain

#include "optim/adamw.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "optim/optimizer_state.h"

namespace dtrain {

namespace {
// The denominator is formed a chunk at a time: a scratch the size of the model would cost as much
// memory as one of the moments, and one allocated afresh every step costs page faults. A chunk of
// 4 MiB (fp32) keeps the per-chunk overhead negligible.
constexpr int64_t kDenomChunk = 1 << 20;
}  // namespace

AdamW::AdamW(AdamWOptions options, const at::Tensor& like)
    : options_(options),
      exp_avg_(at::zeros_like(like)),
      exp_avg_sq_(at::zeros_like(like)),
      denom_(at::empty({std::clamp<int64_t>(like.numel(), 1, kDenomChunk)}, like.options())) {}

void AdamW::step_pieces(const std::vector<StatePiece>& pieces, double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  const double bias1 = 1 - std::pow(options_.beta1, double(steps_));
  const double bias2 = 1 - std::pow(options_.beta2, double(steps_));
  for (const auto& p : pieces) {
    at::Tensor params = p.params;
    const int64_t n = params.numel();
    at::Tensor m = exp_avg_.narrow(0, p.state_offset, n), v = exp_avg_sq_.narrow(0, p.state_offset, n);
    if (options_.weight_decay != 0)
      for (const Span& s : p.decay) {
        at::Tensor decayed = params.narrow(0, s.offset, s.numel);
        decayed.add_(decayed, -lr * options_.weight_decay);
      }
    m.lerp_(p.grads, 1 - options_.beta1);
    v.mul_(options_.beta2).addcmul_(p.grads, p.grads, 1 - options_.beta2);
    for (int64_t from = 0; from < n; from += denom_.numel()) {
      const int64_t len = std::min(denom_.numel(), n - from);
      at::Tensor denom = denom_.narrow(0, 0, len);
      at::sqrt_out(denom, v.narrow(0, from, len)).mul_(1.0 / std::sqrt(bias2)).add_(options_.eps);
      params.narrow(0, from, len).addcdiv_(m.narrow(0, from, len), denom, -lr / bias1);
    }
  }
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

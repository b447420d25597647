#include "optim/sgd.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

void Sgd::update(const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state, int64_t step, double lr, const GradUse& use) {
  at::NoGradGuard no_grad;
  for (const auto& p : pieces) {
    at::Tensor params = p.params;
    at::Tensor d = p.grads;
    if (use.scale != 1) d.mul_(use.scale);
    if (options_.weight_decay != 0 && !p.decay.empty()) {
      d = p.grads.clone();
      for (const Span& s : p.decay) d.narrow(0, s.offset, s.numel).add_(params.narrow(0, s.offset, s.numel), options_.weight_decay);
    }
    if (options_.momentum != 0) {
      at::Tensor buf = state[0].narrow(0, p.state_offset, params.numel());
      if (step == 1) buf.copy_(d);  // torch starts the buffer at the first gradient
      else buf.mul_(options_.momentum).add_(d, 1 - options_.dampening);
      d = options_.nesterov ? d.add(buf, options_.momentum) : buf;
    }
    params.add_(d, -lr);
    if (use.zero_after) p.grads.zero_();
  }
}

}  // namespace dtrain

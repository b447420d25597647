#include "optim/flat_parameters.h"

#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace dtrain {

FlatParameters::FlatParameters(const std::vector<std::pair<std::string, at::Tensor>>& named, Buffers buffers) {
  int64_t total = 0;
  for (auto it = named.rbegin(); it != named.rend(); ++it) {
    const at::Tensor& p = it->second;
    if (!p.requires_grad()) continue;
    entries_.push_back({it->first, p, total, p.numel(), p.dim() >= 2});
    total += p.numel();
  }
  if (entries_.empty()) throw std::invalid_argument("no trainable parameters: train.freeze froze every parameter");
  const auto options = entries_.front().param.options();
  numel_ = total;
  options_ = options;
  for (const auto& e : entries_) {
    TORCH_CHECK(e.param.options().dtype() == options.dtype() && e.param.device() == options.device(),
                "parameter ", e.name, " differs in dtype or device from the others");
    if (!e.decay) continue;
    if (!decay_spans_.empty() && decay_spans_.back().offset + decay_spans_.back().numel == e.offset) decay_spans_.back().numel += e.numel;
    else decay_spans_.push_back({e.offset, e.numel});
  }
  if (buffers == Buffers::None) return;
  const bool grad_buffer = buffers == Buffers::ParametersAndGradients;
  data_ = at::empty({total}, options);
  if (grad_buffer) grad_ = at::zeros({total}, options);
  at::NoGradGuard no_grad;
  for (auto& e : entries_) {
    auto slot = data_.narrow(0, e.offset, e.numel);
    slot.copy_(e.param.detach().reshape({-1}));
    e.param.set_data(slot.view(e.param.sizes()));
    e.param.mutable_grad() = grad_buffer ? grad_.narrow(0, e.offset, e.numel).view(e.param.sizes()) : at::Tensor();
  }
}

void FlatParameters::zero_grad() {
  if (grad_.defined()) {
    grad_.zero_();
    return;
  }
  for (auto& e : entries_) e.param.mutable_grad().reset();
}

}  // namespace dtrain

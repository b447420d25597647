#include "optim/optimizer_state.h"

#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace dtrain {

void restore_state_tensor(const std::map<std::string, at::Tensor>& state, const std::string& name, at::Tensor& into) {
  auto it = state.find(name);
  if (it == state.end()) throw std::runtime_error("optimizer state has no '" + name + "' (saved by another optimizer type?)");
  if (it->second.numel() != into.numel())
    throw std::runtime_error("optimizer state '" + name + "' holds " + std::to_string(it->second.numel()) +
                             " values, the model has " + std::to_string(into.numel()) + " trainable parameters");
  at::NoGradGuard no_grad;
  into.copy_(it->second.reshape(into.sizes()));
}

int64_t state_step(const std::map<std::string, at::Tensor>& state) {
  auto it = state.find("step");
  if (it == state.end()) throw std::runtime_error("optimizer state has no 'step'");
  return it->second.item<int64_t>();
}

}  // namespace dtrain

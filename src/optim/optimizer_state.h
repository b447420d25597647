// Restoring an optimizer's saved tensors, with errors that say what the checkpoint lacks.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>

namespace dtrain {

// Copies state[name] into `into`; throws if it is missing or sized for another model.
void restore_state_tensor(const std::map<std::string, at::Tensor>& state, const std::string& name, at::Tensor& into);
int64_t state_step(const std::map<std::string, at::Tensor>& state);

}  // namespace dtrain

#include "model/parameter_init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "common/hash64.h"

namespace dtrain {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

uint64_t parameter_seed(uint64_t seed, const std::string& name) { return splitmix64(seed ^ splitmix64(fnv1a64(name))); }

void initialise_parameter(const std::string& name, at::Tensor& param, int n_layer, uint64_t seed) {
  at::NoGradGuard no_grad;
  if (param.dim() < 2) {  // a bias or a norm's weight
    param.fill_(ends_with(name, ".bias") ? 0.0 : 1.0);
    return;
  }
  // Residual projections add into the residual stream once per block: their scale keeps its
  // variance from growing with depth.
  const bool residual = ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(parameter_seed(seed, name));
  param.normal_(0.0, residual ? 0.02 / std::sqrt(2.0 * n_layer) : 0.02, gen);
}

}  // namespace dtrain

// The model's normalisation layer: LayerNorm with a bias (GPT-2) or RMSNorm without one (Llama),
// over the last dim. It computes in fp32 whatever the precision: the residual stream it reads is fp32.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "model/layer_hooks.h"

namespace dtrain {

class NormImpl : public torch::nn::Module {
 public:
  enum class Kind { LayerNorm, RmsNorm };
  // Unit weight; LayerNorm's bias starts at zero.
  NormImpl(Kind kind, int64_t features, double eps);
  at::Tensor forward(const at::Tensor& x);
  // How the weight and bias are read (layer_hooks.h).
  void set_parameter_view(ParameterView view) { view_ = std::move(view); }

  at::Tensor weight, bias;  // bias undefined for RMSNorm

 private:
  Kind kind_;
  double eps_;
  ParameterView view_;
};
TORCH_MODULE(Norm);

}  // namespace dtrain

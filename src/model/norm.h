// The model's normalisation layer: LayerNorm with a bias (GPT-2) or RMSNorm without one (Llama),
// over the last dim. It computes in fp32 whatever the precision: the residual stream it reads is fp32.
// On the CPU it runs as one kernel forward and one backward (fused/residual_norm.h), also with the
// residual add before it.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "model/fused/residual_norm.h"
#include "model/layer_hooks.h"

namespace dtrain {

class NormImpl : public torch::nn::Module {
 public:
  enum class Kind { LayerNorm, RmsNorm };
  // Unit weight; LayerNorm's bias starts at zero.
  NormImpl(Kind kind, int64_t features, double eps);
  at::Tensor forward(const at::Tensor& x);
  // h = x + (product + bias) and this norm of h, in one pass each way: the residual add before a
  // pre-norm layer.
  ResidualAndNorm forward_residual(const ResidualAdd& add);
  // How the weight and bias are read (layer_hooks.h).
  void set_parameter_view(ParameterView view) { view_ = std::move(view); }

  at::Tensor weight, bias;  // bias undefined for RMSNorm

 private:
  // The weight and bias as forward reads them (through the view).
  NormParams params() const;

  Kind kind_;
  double eps_;
  ParameterView view_;
};
TORCH_MODULE(Norm);

}  // namespace dtrain

// The model's normalisation layer: LayerNorm with a bias (GPT-2) or RMSNorm without one (Llama),
// over the last dim. It computes in fp32 whatever the precision: the residual stream it reads is fp32.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace dtrain {

class NormImpl : public torch::nn::Module {
 public:
  enum class Kind { LayerNorm, RmsNorm };
  // Unit weight; LayerNorm's bias starts at zero.
  NormImpl(Kind kind, int64_t features, double eps);
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight, bias;  // bias undefined for RMSNorm

 private:
  Kind kind_;
  double eps_;
};
TORCH_MODULE(Norm);

}  // namespace dtrain

// A vision-language model's connector: the MLP that maps each image token's features from the
// vision encoder (d_model·merge² wide) into the LLM's width, two linear layers with GELU (tanh
// approximation, as the encoder's blocks) between them: connector.fc1, connector.fc2.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "model/linear.h"
#include "model/mixed_precision.h"

namespace dtrain {

class ConnectorImpl : public torch::nn::Module {
 public:
  ConnectorImpl(int64_t in_features, int64_t out_features);
  // [tokens, in_features] → [tokens, out_features], in the compute type of the precision set.
  at::Tensor forward(const at::Tensor& x);
  void set_precision(const MixedPrecision& mp);
  std::vector<Linear> matmul_layers() const { return {fc1, fc2}; }

  Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Connector);

}  // namespace dtrain

// A lookup table: row i of `weight` [rows, dim] is the vector of index i (a token, a position).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace dtrain {

class EmbeddingImpl : public torch::nn::Module {
 public:
  // The weight is left uninitialised: the model initialises every parameter by its name.
  EmbeddingImpl(int64_t rows, int64_t dim);
  // indices [...] (int64) → [..., dim], in fp32.
  at::Tensor forward(const at::Tensor& indices) { return at::embedding(weight, indices); }

  at::Tensor weight;
};
TORCH_MODULE(Embedding);

}  // namespace dtrain

// A lookup table: row i of `weight` [rows, dim] is the vector of index i (a token, a position).
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "model/layer_hooks.h"

namespace dtrain {

class EmbeddingImpl : public torch::nn::Module {
 public:
  // The weight is left uninitialised: the model initialises every parameter by its name.
  EmbeddingImpl(int64_t rows, int64_t dim);
  // indices [...] (int64) → [..., dim], in fp32.
  at::Tensor forward(const at::Tensor& indices) { return lookup_ ? lookup_(weight, indices) : at::embedding(weight, indices); }
  // What the lookup becomes (layer_hooks.h): a table split over ranks looks up its own rows.
  void set_lookup(EmbeddingLookup lookup) { lookup_ = std::move(lookup); }

  at::Tensor weight;

 private:
  EmbeddingLookup lookup_;
};
TORCH_MODULE(Embedding);

}  // namespace dtrain

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
  at::Tensor forward(const at::Tensor& indices) {
    return lookup_ ? lookup_(weight, indices) : at::embedding(weight, indices, /*padding_idx=*/-1, /*scale_grad_by_freq=*/false, sparse_gradient_);
  }
  // What the lookup becomes (layer_hooks.h): a table split over ranks looks up its own rows.
  void set_lookup(EmbeddingLookup lookup) { lookup_ = std::move(lookup); }
  // The lookup's gradient as a sparse tensor (the rows of the indices seen) instead of a table-sized
  // one. Only for a table whose gradient has a dense contribution as well (a head tied to it, in the
  // same backward pass), which autograd then adds the sparse one into in place: the parameter's
  // gradient stays dense for every reduction that reads it.
  void set_sparse_gradient(bool sparse) { sparse_gradient_ = sparse; }

  at::Tensor weight;

 private:
  EmbeddingLookup lookup_;
  bool sparse_gradient_ = false;
};
TORCH_MODULE(Embedding);

}  // namespace dtrain

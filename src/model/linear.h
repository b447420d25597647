// The model's linear layer: y = reduce(x·Wᵀ) + b. Its weight is [out_features, in_features] and its
// bias, when it has one, [out_features]. Under mixed precision it keeps a 16-bit working copy of the
// weight for its GEMM (mixed_precision.h). The output reduction is identity unless a parallelism sets
// one: a row-parallel layer, whose ranks each hold a slice of the input features, all-reduces the
// partial products there, and the bias is added after it, so once and not once per rank. Without a
// reduction the bias stays fused in the GEMM (linear_gemm.h), as fast as a plain linear layer.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>

#include "model/layer_hooks.h"
#include "model/mixed_precision.h"

namespace dtrain {

class LinearImpl : public torch::nn::Module {
 public:
  using Reduction = std::function<at::Tensor(const at::Tensor&)>;

  // The weight is left uninitialised (the model initialises every parameter by its name); the bias
  // starts at zero.
  LinearImpl(int64_t in_features, int64_t out_features, bool bias);
  // A layer over another module's weight, which it does not register: the output head tied to the
  // token embedding.
  explicit LinearImpl(at::Tensor shared_weight);

  // x [..., in_features] → [..., out_features], in the compute type of the precision set.
  at::Tensor forward(const at::Tensor& x);
  // reduce(x·Wᵀ) without the bias, for a caller that adds the bias inside the elementwise work that
  // follows the GEMM (bias + GELU; bias + residual + norm) rather than in a pass of its own.
  at::Tensor product(const at::Tensor& x);
  // The bias as forward reads it (through the bias view when one is set); undefined without a bias.
  at::Tensor read_bias() const;

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  // What the GEMM computes in. Working copies are made on the weight's device: set it after moving
  // the layer, then refresh_working_copy() after every change to the weight.
  void set_precision(const MixedPrecision& mp);
  const MixedPrecision& precision() const { return mp_; }
  // Rounds the weight into its 16-bit working copy (made on first use); drops it in fp32.
  void refresh_working_copy();
  // Applied to x·Wᵀ before the bias is added; an empty function restores the identity.
  void set_output_reduction(Reduction reduce) { reduce_ = std::move(reduce); }
  bool has_output_reduction() const { return bool(reduce_); }  // whether a parallelism set one
  // How the bias is read when it is added after the reduction (layer_hooks.h).
  void set_bias_view(ParameterView view) { bias_view_ = std::move(view); }

  at::Tensor weight, bias;  // bias undefined when the layer has none
  at::Tensor working;       // weight in the compute type, for mixed precision: not a parameter

 private:
  MixedPrecision mp_;
  Reduction reduce_;  // empty: identity
  ParameterView bias_view_;
};
TORCH_MODULE(Linear);

}  // namespace dtrain

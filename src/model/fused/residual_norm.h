// The residual add that ends a block's attention and MLP, h = x + (y + b) with y a linear layer's
// product and b its bias, fused with the norm that reads h next: one pass over the rows forward and
// one backward, where ATen makes a pass per op (the bias add, the residual add, and for RMSNorm five
// more). On the CPU, for an fp32 residual stream and a product in fp32, bf16 or fp16; elsewhere
// ATen's ops (at::layer_norm, at::rms_norm: fused kernels on CUDA), which add the bias to the
// product in the product's type, where the kernel adds it in fp32.
//
// The parameters come in as the layers read them (the bias through the linear's bias view, the
// norm's through its parameter view), so a parallelism that maps them (sequence parallelism sums
// their gradients over the ranks) still sees every read.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// A norm over the last dim: LayerNorm with weight and bias, or RMSNorm with weight (bias undefined).
struct NormParams {
  bool rms = false;
  at::Tensor weight, bias;
  double eps = 1e-5;
};

// x + (product + bias): x the fp32 residual stream, product [..., features] in the compute type,
// bias [features] fp32 or undefined. bias_grad_type: the type the bias's gradient (an fp32 sum over
// the tokens) is rounded through, as mixed precision's round_gradients does for a weight's; kFloat:
// not rounded.
struct ResidualAdd {
  at::Tensor x, product, bias;
  at::ScalarType bias_grad_type = at::kFloat;
};

struct ResidualAndNorm {
  at::Tensor residual;  // h, fp32
  at::Tensor normed;    // norm(h), fp32
};

// h = x + (product + bias) and norm(h).
ResidualAndNorm add_residual_and_norm(const ResidualAdd& add, const NormParams& norm);
// h = x + (product + bias) alone: a block's last add, whose norm is the next block's.
at::Tensor add_residual(const ResidualAdd& add);
// norm(x) alone.
at::Tensor normalize(const at::Tensor& x, const NormParams& norm);

// The same computed by ATen's ops, each with its own autograd: the definition the fused path is
// tested against, and what runs where it does not apply.
at::Tensor unfused_residual(const ResidualAdd& add);
at::Tensor unfused_norm(const at::Tensor& x, const NormParams& norm);

}  // namespace dtrain

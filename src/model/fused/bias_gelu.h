// GELU (tanh approximation) of a linear layer's output with the layer's bias added inside GELU's pass:
// GPT-2's MLP up-projection. Forward reads the GEMM's output once and writes GELU's once; backward
// reads the output gradient and the GEMM's output once, writes the input gradient once and sums the
// bias gradient in fp32 on the way (no fp32 copy of the [tokens, n] gradient). On the CPU (fp32, bf16)
// the passes are bias_gelu_kernel.h's; on other devices ATen's ops compute the same (ATen's fused
// cuBLASLt bias + GELU epilogue, _addmm_activation, has no derivative and does not return GELU's
// input, which backward needs: it serves forward passes without gradients on CUDA).
#pragma once
#include <ATen/ATen.h>

#include "model/linear.h"

namespace dtrain {

// GELU_tanh(y + bias) with autograd, for y [..., n] (the GEMM's output without its bias, in the
// compute type) and bias [n]; the result is in y's type. The bias gradient is summed in fp32 and kept
// as `mp` keeps parameter gradients. Keeps y (in its 16 bits) for backward, as GELU kept its input.
at::Tensor bias_gelu_tanh(const at::Tensor& y, const at::Tensor& bias, const MixedPrecision& mp);

// GELU_tanh(layer(x)): the layer's product, then bias_gelu_tanh with the bias as the layer reads it.
at::Tensor linear_gelu_tanh(LinearImpl& layer, const at::Tensor& x);

}  // namespace dtrain

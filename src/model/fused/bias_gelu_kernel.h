// The CPU passes of bias + GELU (tanh approximation) for fp32 and bf16 tensors, one read of each
// operand and one write of each result: bias_gelu.h puts them under autograd. GELU(x) =
// x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))), computed in fp32 with a rational tanh (below).
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// tanh(x) for fp32 x by a rational function of degree 13/6, the minimax form Eigen uses (its
// generic_fast_tanh_float), with x clamped to ±7.9053 where the fraction reaches ±1. Within 3.5e-7 of
// tanh (relative and absolute) on every float: tested in test_bias_gelu.
float tanh_rational(float x);

// Whether the passes below take `y` (on the CPU, fp32 or bf16).
bool bias_gelu_kernel_applies(const at::Tensor& y);

// out = GELU(y + bias) in y's type, for y [rows, n] and bias [n] fp32 (both contiguous).
at::Tensor bias_gelu_forward_cpu(const at::Tensor& y, const at::Tensor& bias);

struct BiasGeluGrads {
  at::Tensor input;  // dL/d(y + bias) = g · GELU'(y + bias), in y's type
  at::Tensor bias;   // Σ over rows of `input` before its rounding, [n] fp32; undefined unless asked for
};
// The gradients for g = dL/d(out) [rows, n] in y's type. The bias gradient sums fixed blocks of rows
// in order, each in order, then the blocks in order: the same sum whatever the thread count.
BiasGeluGrads bias_gelu_backward_cpu(const at::Tensor& g, const at::Tensor& y, const at::Tensor& bias, bool bias_grad);

}  // namespace dtrain

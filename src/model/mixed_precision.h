// Mixed precision (bf16.enabled, fp16.enabled): the model's matmuls and the activations between
// them in a 16-bit format, while the parameters themselves stay fp32 master weights that the
// optimizer steps. Each matmul weight has a 16-bit working copy, refreshed from its master once per
// optimizer step; a matmul's weight gradient is computed straight into fp32 and reaches the master
// through autograd, so gradients accumulate (and data parallelism all-reduces them) in fp32.
// Norms, the residual stream, softmax, RoPE and the loss compute in fp32.
//
// 16-bit GEMMs run natively where the hardware has them (CUDA; CPUs with AVX512-BF16 or -FP16).
// Elsewhere ATen's 16-bit GEMM is a slow fallback, so the 16-bit operands are widened and multiplied
// by the fp32 GEMM: a product of two bf16 (or fp16) values is exact in fp32 and the sums are fp32,
// which is what the hardware units compute, in another summation order.
#pragma once
#include <ATen/ATen.h>

#include <string>

namespace dtrain {

struct MixedPrecision {
  at::ScalarType compute = at::kFloat;  // kFloat: no mixed precision; kBFloat16 or kHalf
  bool native_gemm = true;              // false: 16-bit operands go through the fp32 GEMM (see above)
  // Rounds each weight gradient to the compute type and the accumulated gradient after each
  // micro-batch (data_types.grad_accum_dtype); the all-reduce then sends 16-bit values.
  bool round_gradients = false;

  // The GEMM path follows what `device` can do.
  static MixedPrecision make(at::ScalarType compute, const at::Device& device);
  bool enabled() const { return compute != at::kFloat; }
  // "fp32", or e.g. "bf16 (fp32 master weights; GEMMs on widened bf16 operands)".
  std::string describe() const;

  // `t` rounded to the compute type, in the type the kernels take (widened back to fp32 when the
  // GEMMs run in fp32). Identity without mixed precision.
  at::Tensor operand(const at::Tensor& t) const;
  // `t` in the compute type, as mixed_linear takes its input: cast once where several matmuls read
  // the same tensor (q, k and v; gate and up), so that forward casts it once and backward widens
  // the sum of their gradients once. Identity without mixed precision.
  at::Tensor matmul_input(const at::Tensor& t) const { return enabled() ? t.to(compute) : t; }
  // A parameter's fp32 gradient as the run keeps it: rounded to the compute type (and widened back)
  // under round_gradients, else as it is.
  at::Tensor kept_gradient(const at::Tensor& fp32) const { return round_gradients ? fp32.to(compute).to(at::kFloat) : fp32; }
};

// "fp32", "bf16" or "fp16".
std::string precision_name(at::ScalarType compute);

// a·bᵀ in `out` type on the GEMM path `mp` chose: a and b in the compute type (16-bit operands), or
// fp32 through matmul_nt without mixed precision. For autograd functions' passes.
at::Tensor gemm_nt(const MixedPrecision& mp, const at::Tensor& a, const at::Tensor& b, at::ScalarType out);

// x·weightᵀ + bias. With mixed precision: x is rounded to the compute type, `working` (weight's
// 16-bit copy) is the matrix multiplied, the output is in the compute type, and the gradients of
// `weight` and `bias` come out in fp32. Only x and `working` are kept for backward, in 16 bits.
at::Tensor mixed_linear(const MixedPrecision& mp, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& working,
                        const at::Tensor& bias);

}  // namespace dtrain

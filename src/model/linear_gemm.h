// The GEMMs of the model's fp32 linear layers. On the CPU they run through oneDNN's inner product
// (ATen's mkldnn linear operator, from the oneDNN LibTorch ships) rather than the MKL SGEMM that
// at::linear calls: MKL takes its own AVX2 kernels on AMD processors even where the processor has
// AVX-512, while oneDNN picks its kernels by instruction set alone. On the benchmark machine (AMD
// EPYC with AVX-512) the output and input-gradient products take 5-22% less time, and the GEMMs are
// 85% of a step (bench/linear_gemm.sh compares the two on any machine). A weight gradient's first
// operand is a transposed view (the product sums over tokens), which ATen's operator would copy into
// rows first; MKL reads it in place, as fast, so such products stay with MKL. Other devices and
// types, and a LibTorch built without oneDNN, keep ATen's kernels.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// a·bᵀ + bias: a [..., K], b [N, K] (any strides), bias [N] or undefined; the result [..., N]. No
// gradient of its own: for autograd functions' passes and code without gradients (linear_fp32 is
// the layer with gradients).
at::Tensor matmul_nt(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias = {});

// Whether matmul_nt takes oneDNN for `a`: fp32 on the CPU, contiguous, not empty, and this LibTorch
// has oneDNN.
bool matmul_nt_uses_onednn(const at::Tensor& a);

// oneDNN's inner product itself, whatever a's layout (bench/linear_gemm.sh compares it with MKL);
// only where onednn_available().
bool onednn_available();
at::Tensor onednn_matmul_nt(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias = {});

// at::linear(x, weight, bias) with autograd whose three products go through matmul_nt. Keeps x only
// when weight needs a gradient and weight only when x does, as at::linear's own backward does.
// While a DeferWeightGrads guard is alive (weight_grad_store.h), backward leaves the weight gradient
// to the guard's store, and forward takes that autograd function on every device, so that the
// backward of a forward run under a guard can be deferred.
at::Tensor linear_fp32(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace dtrain

// The GEMMs of the model's fp32 linear layers. On the CPU they run through oneDNN's matmul (the
// library LibTorch ships for its mkldnn operators) rather than the MKL SGEMM that at::linear calls:
// MKL takes its own AVX2 kernels on AMD processors even where the processor has AVX-512, while
// oneDNN picks its kernels by instruction set alone. On the benchmark machine (AMD EPYC with AVX-512)
// the output and input-gradient products take 5-20% less time, and the GEMMs are 85% of a step
// (bench/linear_gemm.sh compares the two on any machine). Other devices and types, and a LibTorch
// built without oneDNN, keep ATen's kernels.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// a·bᵀ + bias: a [..., K], b [N, K] (any strides), bias [N] or undefined; the result [..., N].
at::Tensor matmul_nt(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias = {});

// at::linear(x, weight, bias) with autograd whose output and input gradient go through matmul_nt
// (the weight gradient stays with MKL, see the .cpp). Keeps x and weight for backward, as at::linear does.
at::Tensor linear_fp32(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Whether matmul_nt takes oneDNN for `a` (fp32 on the CPU, and this LibTorch has it).
bool matmul_nt_uses_onednn(const at::Tensor& a);

}  // namespace dtrain

// The row loops of the fused residual add and norm (residual_norm.h), over raw fp32 rows and a
// product in fp32, bf16 or fp16. Every pointer named optional may be null.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace dtrain::fused {

struct ResidualNormRows {
  int64_t rows = 0, features = 0;
  c10::ScalarType product_type = c10::kFloat;  // the type of `product` and `d_product`
  // h = x + (product + bias); without a product, h is x itself.
  const float* x = nullptr;
  const void* product = nullptr;  // optional
  const float* bias = nullptr;    // optional
  float* h = nullptr;             // written when there is a product
  // n = norm(h): (h − mean)·rstd·weight + norm_bias (LayerNorm), h·rstd·weight (RMSNorm).
  const float* weight = nullptr;  // optional: null, no norm
  const float* norm_bias = nullptr;
  float eps = 0;
  bool rms = false;
  float* n = nullptr;
  float *mean = nullptr, *rstd = nullptr;  // [rows], kept for backward (mean: LayerNorm only)
};

// Forward: h (when there is a product), then n, mean and rstd (when there is a norm).
void residual_norm_forward(const ResidualNormRows& rows);

struct ResidualNormGrads {
  const float* d_h = nullptr;  // optional: h's gradient from downstream
  const float* d_n = nullptr;  // optional
  float* d_x = nullptr;        // = dh = d_h + normᵀ·d_n
  void* d_product = nullptr;   // optional: dh in the product's type (unless that is fp32: then d_x serves)
  // Sums over the rows, in fp32, each optional: of dh (the bias's gradient), d_n·x̂ (the norm's
  // weight) and d_n (the norm's bias). Overwritten, not accumulated into.
  float *d_bias = nullptr, *d_weight = nullptr, *d_norm_bias = nullptr;
};

// Backward, from the forward's rows: the norm's input (h, or x where h is not set), mean, rstd and
// the weight; product_type says d_product's type.
void residual_norm_backward(const ResidualNormRows& rows, const ResidualNormGrads& grads);

}  // namespace dtrain::fused

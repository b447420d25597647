// The sum over tokens of a [..., n] gradient into fp32: a layer's bias gradient. On the CPU a 16-bit
// gradient is read as it is and summed in fp32 (ATen 2.11's CPU sum with an fp32 dtype first makes an
// fp32 copy of the whole gradient); other devices keep at::sum, which already reads 16 bits there.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// g [..., n] → [n] fp32, each column summed in fp32. On the CPU (fp32, bf16 and fp16) each column is
// summed token by token in order, whatever the thread count: the result is that of a sequential fp32
// sum, within n_tokens · 2⁻²⁴ · Σ|g| of the exact one. Work is split over blocks of columns.
at::Tensor sum_over_tokens_fp32(const at::Tensor& g);

}  // namespace dtrain

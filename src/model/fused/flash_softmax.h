// The fp32 row work between the flash-attention kernel's block GEMMs (flash_attention.h): scores to
// probabilities, and probabilities to score gradients. Plain loops compiled for several ISAs.
#pragma once
#include <cstdint>

namespace dtrain::flash {

// x[i] = exp(x[i]·scale - shift), returning the sum of the results. -inf inputs (masked scores) give 0.
// exp(y) is 2^t, t = y·log2(e) rounded to fp32, as 2^n · p(f) with a degree-6 polynomial on f in
// [-1/2, 1/2]: relative error below 3e-7 + 1e-7·|y| (the second term is t's rounding) for y in
// [-87, 88] (tests/model/test_flash_attention.cpp); y below -126.5·ln 2 gives 0.
float exp_and_sum(float* x, int64_t n, float scale, float shift);

// The largest of x[0..n).
float row_max(const float* x, int64_t n);

// ds[i] = p[i]·(dp[i] - d)·scale: the gradient of the scaled scores, with d = rowsum(dout·out).
void softmax_gradient(float* ds, const float* p, const float* dp, int64_t n, float d, float scale);

// out[i] = x[i] rounded to bf16 (fused::narrow), as the bits c10::BFloat16 holds.
void round_to_bfloat16(const float* x, int64_t n, uint16_t* out);

}  // namespace dtrain::flash

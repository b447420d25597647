// AdamW's update of contiguous fp32 CPU memory in one pass: each element's parameter, gradient and
// two moments are read once and written once, where the same update as ATen operations takes six
// passes over memory (lerp, mul, addcmul, sqrt, scale, addcdiv). The loop is compiled for AVX-512,
// AVX2 and the baseline, and the CPU picks at load time (GCC's target_clones). The arithmetic is
// torch.optim.AdamW's, operation for operation.
#pragma once
#include <cstdint>

namespace dtrain {

struct AdamWStep {
  float decay;             // -lr·weight_decay where weight decay applies, else 0
  float grad_weight;       // 1 - beta1 (the moment's lerp towards the gradient)
  float beta2, one_minus_beta2;
  float inv_sqrt_bias2;    // 1 / sqrt(1 - beta2^step)
  float eps;
  float step_size;         // -lr / (1 - beta1^step)
};

// Updates elements [0, n) of p, m and v from g, split over the intra-op threads.
void fused_adamw(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);

}  // namespace dtrain

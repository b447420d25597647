// AdamW's update of contiguous fp32 CPU memory in one pass: each element's parameter, gradient and
// two moments are read once and written once, where the same update as ATen operations takes six
// passes over memory (lerp, mul, addcmul, sqrt, scale, addcdiv). The loop is compiled for AVX-512,
// AVX2 and the baseline, and the CPU picks at load time (GCC's target_clones). The operations and
// their order are torch.optim.AdamW's, each rounded to fp32 on its own (no fused multiply-adds, so a
// piece's result does not depend on where the vector loop splits it); where ATen's kernels contract
// into multiply-adds the last bit may differ from torch's.
#pragma once
#include <cstdint>

#include "optim/decay_spans.h"

namespace dtrain {

struct AdamWStep {
  float decay;             // -lr·weight_decay, applied where the decay spans say
  float grad_weight;       // 1 - beta1 (the moment's lerp towards the gradient)
  float beta2, one_minus_beta2;
  float inv_sqrt_bias2;    // 1 / sqrt(1 - beta2^step)
  float eps;
  float step_size;         // -lr / (1 - beta1^step)
  // Each gradient times this as it is read (the clipping factor; 1 for none). In fp32, as ATen's
  // in-place multiplication of an fp32 buffer by a scalar rounds, so the update is bit for bit that
  // of a separate clipping pass followed by the unscaled update.
  float grad_scale;
};

// Updates elements [0, n) of p, m and v from g, writing 0 over each gradient once read where
// `zero_grads` says (the next step accumulates into it), split over the intra-op threads (one parallel loop
// for the whole range, each thread walking the decay spans inside its share).
void fused_adamw(float* p, float* g, float* m, float* v, int64_t n, const Spans& decay, const AdamWStep& s, bool zero_grads);

}  // namespace dtrain

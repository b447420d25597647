#include "optim/fused_adamw.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

namespace dtrain {

namespace {

// Enough elements per task that a thread's share outweighs the cost of handing it out.
constexpr int64_t kGrain = 1 << 15;

// One body for both entry points below, inlined into each of their ISA clones.
template <bool kZeroGrads>
__attribute__((always_inline)) inline void update_body(float* __restrict p, float* __restrict g, float* __restrict m, float* __restrict v,
                                                       int64_t n, const AdamWStep& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.grad_scale;
    if (kZeroGrads) g[i] = 0;
    const float param = p[i] + s.decay * p[i];
    const float mi = m[i] + s.grad_weight * (gi - m[i]);
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = param + s.step_size * (mi / (std::sqrt(vi) * s.inv_sqrt_bias2 + s.eps));
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void update(float* __restrict p, float* __restrict g,
                                                                            float* __restrict m, float* __restrict v, int64_t n,
                                                                            AdamWStep s) {
  update_body<false>(p, g, m, v, n, s);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void update_zeroing_grads(float* __restrict p, float* __restrict g,
                                                                                        float* __restrict m, float* __restrict v, int64_t n,
                                                                                        AdamWStep s) {
  update_body<true>(p, g, m, v, n, s);
}

}  // namespace

void fused_adamw(float* p, float* g, float* m, float* v, int64_t n, const Spans& decay, const AdamWStep& s, bool zero_grads) {
  AdamWStep plain = s;
  plain.decay = 0;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    auto run = [&](int64_t from, int64_t to, const AdamWStep& step) {
      if (from < to) (zero_grads ? update_zeroing_grads : update)(p + from, g + from, m + from, v + from, to - from, step);
    };
    // The first span that ends after `begin`; spans are sorted and disjoint.
    auto it = std::upper_bound(decay.begin(), decay.end(), begin, [](int64_t at, const Span& d) { return at < d.offset + d.numel; });
    int64_t at = begin;
    for (; it != decay.end() && it->offset < end; ++it) {
      run(at, std::max(at, it->offset), plain);
      at = std::max(at, it->offset);
      run(at, std::min(end, it->offset + it->numel), s);
      at = std::min(end, it->offset + it->numel);
    }
    run(at, end, plain);
  });
}

}  // namespace dtrain

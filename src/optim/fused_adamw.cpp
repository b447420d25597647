#include "optim/fused_adamw.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

namespace dtrain {

namespace {

// Enough elements per task that a thread's share outweighs the cost of handing it out.
constexpr int64_t kGrain = 1 << 15;

__attribute__((target_clones("avx512f", "avx2", "default"))) void update(float* __restrict p, const float* __restrict g,
                                                                            float* __restrict m, float* __restrict v, int64_t n,
                                                                            AdamWStep s) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.grad_scale;
    const float param = p[i] + s.decay * p[i];
    const float mi = m[i] + s.grad_weight * (gi - m[i]);
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = param + s.step_size * (mi / (std::sqrt(vi) * s.inv_sqrt_bias2 + s.eps));
  }
}

}  // namespace

void fused_adamw(float* p, const float* g, float* m, float* v, int64_t n, const Spans& decay, const AdamWStep& s) {
  AdamWStep plain = s;
  plain.decay = 0;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    auto run = [&](int64_t from, int64_t to, const AdamWStep& step) {
      if (from < to) update(p + from, g + from, m + from, v + from, to - from, step);
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

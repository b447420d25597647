#include "optim/fused_squares.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace dtrain {

namespace {

constexpr int64_t kBlock = 1 << 16;
constexpr int kLanes = 16;

// Lane j sums the squares of elements j, j + 16, ...; the lanes are added in order at the end. The
// lanes are independent sums, so GCC vectorises them without reordering any addition.
__attribute__((target_clones("avx512f", "avx2", "default"))) double block_sum(const float* __restrict g, int64_t n) {
  double lane[kLanes] = {};
  const int64_t whole = n - n % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += double(g[i + j]) * double(g[i + j]);
  for (int64_t i = whole; i < n; ++i) lane[i - whole] += double(g[i]) * double(g[i]);
  double sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += lane[j];
  return sum;
}

}  // namespace

double fused_sum_of_squares(const float* g, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) partial[size_t(b)] = block_sum(g + b * kBlock, std::min(kBlock, n - b * kBlock));
  });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace dtrain

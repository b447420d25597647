#include "train/matmul_peak.h"

#include <algorithm>
#include <chrono>

namespace dtrain {

double measure_matmul_flops(const at::Device& device, double seconds) {
  const int64_t n = 1024;  // large enough that every thread is busy and packing costs little
  // Constant inputs: the rate does not depend on values, and the global RNG stays untouched.
  auto a = at::full({n, n}, 0.5, at::TensorOptions().device(device));
  auto b = at::full({n, n}, 0.25, at::TensorOptions().device(device));
  for (int i = 0; i < 3; ++i) at::matmul(a, b).cpu();  // warm-up: thread pool, BLAS buffers, clocks
  // A peak is the best the kernels reach, so the rate is the best of five windows: a window in which
  // another process took a core says nothing about the kernels.
  using Clock = std::chrono::steady_clock;
  double best = 0;
  for (int window = 0; window < 5; ++window) {
    const auto start = Clock::now();
    int64_t runs = 0;
    double elapsed = 0;
    while (elapsed < seconds / 5) {
      at::matmul(a, b).cpu();  // .cpu() waits for device work
      ++runs;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    best = std::max(best, 2.0 * n * n * n * runs / elapsed);
  }
  return best;
}

}  // namespace dtrain

#include "train/matmul_peak.h"

#include <algorithm>
#include <chrono>

namespace dtrain {

double measure_matmul_flops(const at::Device& device, int64_t m, int64_t k, int64_t n, double seconds) {
  // Constant inputs: the rate does not depend on values, and the global RNG stays untouched.
  auto a = at::full({m, k}, 0.5, at::TensorOptions().device(device));
  auto b = at::full({k, n}, 0.25, at::TensorOptions().device(device));
  auto c = at::empty({m, n}, at::TensorOptions().device(device));
  auto run = [&] { at::matmul_out(c, a, b).sum().item<float>(); };  // item() waits for device work
  for (int i = 0; i < 3; ++i) run();  // warm-up: thread pool, BLAS buffers, clocks
  using Clock = std::chrono::steady_clock;
  constexpr int kWindows = 7;
  double best = 0;
  for (int window = 0; window < kWindows; ++window) {
    const auto start = Clock::now();
    int64_t runs = 0;
    double elapsed = 0;
    while (elapsed < seconds / kWindows) {
      run();
      ++runs;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    best = std::max(best, 2.0 * double(m) * double(k) * double(n) * double(runs) / elapsed);
  }
  return best;
}

}  // namespace dtrain

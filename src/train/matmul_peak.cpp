#include "train/matmul_peak.h"

#include <chrono>

namespace dtrain {

double measure_matmul_flops(const at::Device& device, double seconds) {
  const int64_t n = 1024;  // large enough that every thread is busy and packing costs little
  // Constant inputs: the rate does not depend on values, and the global RNG stays untouched.
  auto a = at::full({n, n}, 0.5, at::TensorOptions().device(device));
  auto b = at::full({n, n}, 0.25, at::TensorOptions().device(device));
  at::matmul(a, b);  // warm-up
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  int64_t runs = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    auto c = at::matmul(a, b);
    c.cpu();  // waits for device work
    ++runs;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return 2.0 * n * n * n * runs / elapsed;
}

}  // namespace dtrain

#include "train/matmul_peak.h"

#include <algorithm>
#include <chrono>

namespace dtrain {

namespace {

// The best rate of an [m × k] · [k × n] matmul over `windows` windows of `window_s` seconds.
double best_rate(const at::Device& device, at::ScalarType dtype, int64_t m, int64_t k, int64_t n, int windows, double window_s) {
  // Constant inputs: the rate does not depend on values, and the global RNG stays untouched.
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  auto a = at::full({m, k}, 0.5, options);
  auto b = at::full({k, n}, 0.25, options);
  auto c = at::empty({m, n}, options);
  auto run = [&] { at::matmul_out(c, a, b).select(0, 0).select(0, 0).item<float>(); };  // item() waits for device work
  for (int i = 0; i < 3; ++i) run();  // warm-up: thread pool, BLAS buffers, clocks
  using Clock = std::chrono::steady_clock;
  double best = 0;
  for (int window = 0; window < windows; ++window) {
    const auto start = Clock::now();
    int64_t runs = 0;
    double elapsed = 0;
    while (elapsed < window_s) {
      run();
      ++runs;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    best = std::max(best, 2.0 * double(m) * double(k) * double(n) * double(runs) / elapsed);
  }
  return best;
}

}  // namespace

double measure_matmul_flops(const at::Device& device, int64_t tokens, int64_t d_model, int64_t d_ff, double seconds,
                            at::ScalarType dtype) {
  constexpr int kWindows = 5;
  const double window_s = seconds / (3 * kWindows);
  return std::max({best_rate(device, dtype, tokens, d_model, d_ff, kWindows, window_s),
                   best_rate(device, dtype, tokens, d_ff, d_model, kWindows, window_s),
                   best_rate(device, dtype, d_model, tokens, d_ff, kWindows, window_s)});
}

}  // namespace dtrain

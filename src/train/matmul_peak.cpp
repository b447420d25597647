#include "train/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "model/linear_gemm.h"

namespace dtrain {

namespace {

// The best rate of `product`, `flops` per call, over `windows` windows of `window_s` seconds.
double best_rate(const std::function<at::Tensor()>& product, double flops, int windows, double window_s) {
  auto run = [&] { product().select(0, 0).select(0, 0).item<float>(); };  // item() waits for device work
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
    best = std::max(best, flops * double(runs) / elapsed);
  }
  return best;
}

}  // namespace

double measure_matmul_flops(const at::Device& device, int64_t tokens, int64_t d_model, int64_t d_ff, double seconds,
                            at::ScalarType dtype) {
  constexpr int kWindows = 5;
  const double window_s = seconds / (3 * kWindows), flops = 2.0 * double(tokens) * double(d_model) * double(d_ff);
  // Constant operands: the rate does not depend on values, and the global RNG stays untouched. The
  // products are the layer's own, through the kernels it calls (model/linear_gemm.h).
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor x = at::full({tokens, d_model}, 0.5, options), w = at::full({d_ff, d_model}, 0.25, options);
  const at::Tensor g = at::full({tokens, d_ff}, 0.125, options);
  return std::max({best_rate([&] { return matmul_nt(x, w); }, flops, kWindows, window_s),
                   best_rate([&] { return matmul_nt(g, w.t()); }, flops, kWindows, window_s),
                   best_rate([&] { return matmul_nt(g.t(), x.t()); }, flops, kWindows, window_s)});
}

}  // namespace dtrain

#include "train/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "common/number_text.h"

#include "model/linear_gemm.h"

namespace dtrain {

namespace {

using ProbeClock = std::chrono::steady_clock;

// One GEMM of the probe and the best rate it reached so far.
struct Timed {
  std::function<at::Tensor()> product;
  double best = 0;

  static double seconds_since(ProbeClock::time_point start) { return std::chrono::duration<double>(ProbeClock::now() - start).count(); }
  void run() const { product().select(0, 0).select(0, 0).item<float>(); }  // item() waits for device work
  // Runs it for `window_s` seconds and keeps the rate if it is the best.
  void window(double flops, double window_s) {
    const auto start = ProbeClock::now();
    int64_t runs = 0;
    double elapsed = 0;
    while (elapsed < window_s) {
      run();
      ++runs;
      elapsed = seconds_since(start);
    }
    best = std::max(best, flops * double(runs) / elapsed);
  }
};

}  // namespace

double measure_matmul_flops(const at::Device& device, int64_t tokens, int64_t d_model, int64_t d_ff, double seconds,
                            at::ScalarType dtype) {
  constexpr int kRounds = 8;
  const double window_s = seconds / (3 * kRounds), flops = 2.0 * double(tokens) * double(d_model) * double(d_ff);
  // Constant operands: the rate does not depend on values, and the global RNG stays untouched. The
  // products are the layer's own, through the kernels it calls (model/linear_gemm.h).
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor x = at::full({tokens, d_model}, 0.5, options), w = at::full({d_ff, d_model}, 0.25, options);
  const at::Tensor g = at::full({tokens, d_ff}, 0.125, options);
  std::vector<Timed> gemms{{[&] { return matmul_nt(x, w); }}, {[&] { return matmul_nt(g, w.t()); }}, {[&] { return matmul_nt(g.t(), x.t()); }}};
  // Warm-up: thread pool, the library's packed buffers and kernels, clocks.
  for (const Timed& gemm : gemms) {
    const auto start = ProbeClock::now();
    for (int runs = 0; runs < 3 || Timed::seconds_since(start) < window_s; ++runs) gemm.run();
  }
  for (int round = 0; round < kRounds; ++round)
    for (Timed& gemm : gemms) gemm.window(flops, window_s);
  double best = 0;
  for (const Timed& gemm : gemms) best = std::max(best, gemm.best);
  return best;
}

std::optional<std::string> MfuPeak::observe(double achieved) {
  if (achieved <= flops_) return std::nullopt;
  std::optional<std::string> warning;
  if (!warned_ && achieved > 1.01 * flops_) {
    warned_ = true;
    warning = "the model reached " + fixed(achieved / 1e9, 1) + " GFLOP/s, above the matmul peak of " + fixed(flops_ / 1e9, 1) +
              " GFLOP/s measured at start (the machine was busy then?); MFU is now against the fastest step's rate, without "
              "another warning; set train.peak_flops for a fixed bound";
  }
  flops_ = achieved;
  return warning;
}

}  // namespace dtrain

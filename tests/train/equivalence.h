// Whether one training run trained like another: each step's training and validation loss and
// gradient norm (metrics.jsonl) and every parameter of the last checkpoint, by whatever names the
// checkpoint holds. Every comparison is per element, |got - expected| <= atol + rtol·|expected|,
// with tolerances that model the arithmetic in which the runs differ, never a share of a tensor's
// range; a failure names the step or the parameter and element, and both values.
#pragma once
#include <gtest/gtest.h>
#ifdef DTRAIN_CUDA
#include <torch/cuda.h>
#endif

#include <cmath>
#include <iomanip>
#include <sstream>

#include "training_run.h"

namespace dtrain::test {

struct Tolerance {
  double atol = 0, rtol = 0;

  double bound(double expected) const { return atol + rtol * std::abs(expected); }
  std::string describe() const {
    if (atol == 0 && rtol == 0) return "bit for bit";
    std::ostringstream s;
    s << "atol " << atol << ", rtol " << rtol;
    return s.str();
  }
};

// What may differ between two runs: each step's losses and gradient norm, and each element of the
// final parameters, whose atol is per optimizer step the runs took (the learning rate bounds how far
// an AdamW step moves an element, whatever its size, so a bias that starts at zero gets the bound of
// a large weight). `why` names the arithmetic that differs; failures print it.
struct Bounds {
  Tolerance loss, grad_norm, parameters_per_step;
  std::string why;
};

constexpr double kLr = 0.002;  // optimizer.params.lr in kBase

// Both runs do the same operations in the same order.
inline const Bounds kBitForBit = {{}, {}, {}, "the same operations in the same order"};

// Whether the runs compute on a GPU: a CUDA build on a machine that has one.
inline bool runs_on_gpu() {
#ifdef DTRAIN_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

// fp32 sums in another order (a batch on one rank against pieces summed by an all-reduce, a
// reduce-scatter or accumulation). Loss and gradient norm: rtol 1e-5; the norm is compared because
// AdamW is blind to a gradient's scale, so a missing 1/dp or a bucket reduced twice shows in the norm
// first. Parameters: rtol 1e-6, a few ulps of the value (decay and update each round at 6e-8), and
// atol 1e-3 of what a step can move an element: the rounding of the gradient changes a step by a
// small fraction of its size, larger for the rare element whose gradient is a sum that nearly
// cancels, near AdamW's eps, where a few ulps of the summands are a part in a thousand of the sum
// (measured: up to 2.8e-4 of the learning rate per step). docs/decisions.md says how these bounds
// were shown to catch broken averaging, a dropped micro-batch and a bucket reduced twice.
inline const Bounds kFp32Reordered = {{0, 1e-5}, {0, 1e-5}, {1e-3 * kLr, 1e-6}, "fp32 sums in another order"};

// bf16 activations on both sides, fp32 sums in another order: a changed sum can flip an activation's
// or a working weight's bf16 rounding (2^-9 of it). Loss within 1e-3 and gradient norm within 1e-2
// relative (a missing 1/dp doubles the norm, a dropped micro-batch moves the loss by percents).
// Parameters: AdamW turns such noise in a near-zero gradient into a full-size update of another sign,
// so a rare element differs by up to ~10% of what the steps can move it (measured): a quarter of
// that, plus 2^-8 of its size.
inline const Bounds kBf16Reordered = {{0, 1e-3}, {0, 1e-2}, {0.25 * kLr, 1.0 / 256},
                                      "bf16 roundings of activations after fp32 sums in another order"};

// fp16 activations on both sides (dynamic loss scale) after fp32 sums in another order, and under
// tensor parallelism fp16 sums: each rank's partial output of a row-parallel layer is an fp16
// activation, rounded (2^-11 of it) before the all-reduce adds them, where one rank rounds the whole
// sum once. Measured between tp 2 and one rank: loss 1.3e-6 and gradient norm 5.8e-5 relative;
// parameters up to 6.7% of what the steps can move them, in a rare element whose gradient nearly
// cancels (AdamW turns the noise into an update; data parallelism alone, whose activations are
// those of one rank, 0.02%). Bounds: loss 1e-4 (a dropped micro-batch moves it by percents),
// gradient norm 1e-3 (an fp16 gradient left scaled by the loss scale is off 65536 times, a missing
// 1/dp doubles it), parameters 20% of the learning rate per step and 2^-10 of their size.
inline const Bounds kFp16Reordered = {{0, 1e-4}, {0, 1e-3}, {0.2 * kLr, 1.0 / 1024},
                                      "fp16 roundings of activations and partial sums after fp32 sums in another order"};

// Bit for bit is the CPU build's promise: there the shared-memory backend sums in rank order and the
// kernels are deterministic. Ranks that share a GPU talk over Gloo, whose rings sum a reduce-scatter's
// chunks in another order than an all-reduce's, and some CUDA kernels add with atomics (index_add_,
// scatter_add_, embedding backward), so two runs of one program can differ in the last bits. On a GPU
// such a comparison is held to fp32 sums in another order.
inline const Bounds& attainable(const Bounds& b) {
  const auto exact = [](const Tolerance& t) { return t.atol == 0 && t.rtol == 0; };
  const bool bit_for_bit = exact(b.loss) && exact(b.grad_norm) && exact(b.parameters_per_step);
  return bit_for_bit && runs_on_gpu() ? kFp32Reordered : b;
}

namespace detail {

inline std::string exact(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  return s.str();
}

inline void expect_value(double got, double expected, const Tolerance& t, const std::string& what, const std::string& why) {
  const double diff = std::abs(got - expected);
  EXPECT_TRUE(diff <= t.bound(expected)) << what << ": got " << exact(got) << ", expected " << exact(expected) << " (|diff| " << diff
                                         << " > " << t.bound(expected) << ": " << t.describe() << ", " << why << ")";
}

// Each `keys` value of each line, matched by position: both runs log the same steps.
inline void expect_lines(const std::vector<nlohmann::json>& got, const std::vector<nlohmann::json>& expected,
                         const std::vector<std::pair<std::string, Tolerance>>& keys, const std::string& what, const std::string& why) {
  if (got.size() != expected.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " lines against " << expected.size();
    return;
  }
  for (size_t i = 0; i < got.size(); ++i)
    for (const auto& [key, tolerance] : keys) {
      const std::string at = what + ", step " + std::to_string(expected[i].value("step", 0)) + " " + key;
      if (!expected[i].contains(key)) continue;
      if (!got[i].contains(key)) {
        ADD_FAILURE() << at << ": missing";
        continue;
      }
      // A value that is not a number is a non-finite one: metrics.jsonl writes NaN and infinity as null.
      if (!got[i][key].is_number() || !expected[i][key].is_number()) {
        ADD_FAILURE() << at << ": got " << got[i][key].dump() << ", expected " << expected[i][key].dump() << " (null: not finite)";
        continue;
      }
      expect_value(got[i][key].get<double>(), expected[i][key].get<double>(), tolerance, at, why);
    }
}

// "[2, 17]" for the flat index 81 of a [4, 32] tensor.
inline std::string element(const at::Tensor& t, int64_t flat) {
  std::vector<int64_t> index(size_t(t.dim()));
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    index[size_t(d)] = flat % t.size(d);
    flat /= t.size(d);
  }
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d) s += (d ? ", " : "") + std::to_string(index[d]);
  return s + "]";
}

}  // namespace detail

// Every parameter within `t` of the expected one, element by element, and none on one side only.
// A tensor out of bounds reports how many elements are and the worst of them.
inline void expect_parameters(const std::map<std::string, at::Tensor>& got, const std::map<std::string, at::Tensor>& expected,
                              const Tolerance& t, const std::string& what = "", const std::string& why = "") {
  const std::string prefix = what.empty() ? "" : what + ", ";
  for (const auto& [name, g] : got)
    if (!expected.count(name)) ADD_FAILURE() << prefix << "parameter " << name << " is not in the expected checkpoint";
  for (const auto& [name, e] : expected) {
    const auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << prefix << "parameter " << name << " is missing";
      continue;
    }
    if (!it->second.sizes().equals(e.sizes())) {
      ADD_FAILURE() << prefix << "parameter " << name << " has shape " << it->second.sizes() << ", expected " << e.sizes();
      continue;
    }
    const at::Tensor g = it->second.to(at::kDouble).flatten(), x = e.to(at::kDouble).flatten();
    const at::Tensor excess = at::nan_to_num((g - x).abs() - (t.atol + t.rtol * x.abs()), INFINITY);
    const int64_t beyond = excess.gt(0).sum().item<int64_t>();
    if (beyond == 0) continue;
    const int64_t worst = excess.argmax().item<int64_t>();
    const double gw = g[worst].item<double>(), xw = x[worst].item<double>();
    ADD_FAILURE() << prefix << "parameter " << name << ": " << beyond << " of " << x.numel() << " elements out of bounds; the worst, "
                  << name << detail::element(e, worst) << ": got " << detail::exact(gw) << ", expected " << detail::exact(xw)
                  << " (|diff| " << std::abs(gw - xw) << " > " << t.bound(xw) << ": " << t.describe() << (why.empty() ? "" : ", " + why)
                  << ")";
  }
}

// `got` trained like `expected` within `b`: both ran, logged the same steps, and ended with the same
// parameters. `what` names the comparison in every failure.
inline void expect_equivalent(const TrainingRun& got, const TrainingRun& expected, const Bounds& bounds, const std::string& what) {
  const Bounds& b = attainable(bounds);
  if (got.result.exit_code != 0 || expected.result.exit_code != 0) {
    ADD_FAILURE() << what << ": a run failed:\n" << (got.result.exit_code != 0 ? got.result.output : expected.result.output);
    return;
  }
  if (got.steps.empty() || got.steps.size() != expected.steps.size()) {
    ADD_FAILURE() << what << ": " << got.steps.size() << " training steps logged against " << expected.steps.size();
    return;
  }
  detail::expect_lines(got.steps, expected.steps, {{"loss", b.loss}, {"grad_norm", b.grad_norm}}, what, b.why);
  detail::expect_lines(got.validations, expected.validations, {{"val_loss", b.loss}}, what + " validation", b.why);
  const double steps = double(expected.steps.size());
  const Tolerance parameters = {b.parameters_per_step.atol * steps, b.parameters_per_step.rtol};
  const int last = expected.steps.back()["step"].get<int>();
  expect_parameters(final_parameters(got, last), final_parameters(expected, last), parameters, what, b.why);
}

// The suite's fp32 check of two runs that sum in other orders, for `steps` steps.
inline void expect_same_training(const TrainingRun& got, const TrainingRun& expected, int steps) {
  ASSERT_EQ(int(got.steps.size()), steps) << got.result.output;
  expect_equivalent(got, expected, kFp32Reordered, got.dir + " against " + expected.dir);
}

// Every parameter equal bit for bit, and none on one side only; on a GPU (attainable) within fp32
// reordering of the at most 10 steps these comparisons train.
inline void expect_same_parameters(const std::map<std::string, at::Tensor>& got, const std::map<std::string, at::Tensor>& expected) {
  const Tolerance per_step = attainable(kBitForBit).parameters_per_step;
  expect_parameters(got, expected, {per_step.atol * 10, per_step.rtol});
}

}  // namespace dtrain::test

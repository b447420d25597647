// The FLOP rate one rank's matmuls actually reach here, which MFU is reported against. A datasheet
// peak means little on a shared CPU; a measured one is honest if it is a true upper bound: the GEMMs
// are shaped like the model's largest layer (tokens of a micro-batch M, d_model D, d_ff F) in its
// three forms — forward M×D·D×F, input gradient M×F·F×D, weight gradient F×M·M×D, whose long inner
// dimension runs fastest — through the kernels the layer calls (model/linear_gemm.h), at the rank's
// own thread count and in the type the run multiplies in, and the rate is the best of several
// windows, since a window in which another process held a core says nothing about the kernels. The
// windows of the three GEMMs take turns, spread over the whole probe, so that a busy moment costs one
// window of each rather than every window of one.
// Takes about `seconds`.
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace dtrain {

// The best rate of the three GEMMs of a tokens × d_model → d_ff layer on `device`, with operands
// and result in `dtype`.
double measure_matmul_flops(const at::Device& device, int64_t tokens, int64_t d_model, int64_t d_ff, double seconds = 1.5,
                            at::ScalarType dtype = at::kFloat);

// The peak MFU is reported against: the measured one, raised to what the model reaches if that is
// more, since MFU above 100% would be a wrong number, not a fast run (the probe ran in a busy
// moment). The first raise by more than rounding (1%) is worth a warning, and only the first: after
// it the peak follows the model silently.
class MfuPeak {
 public:
  explicit MfuPeak(double flops = 0) : flops_(flops) {}
  double flops() const { return flops_; }
  // Takes the FLOP/s a step reached; returns the warning to print, at most once a run.
  std::optional<std::string> observe(double achieved);

 private:
  double flops_;
  bool warned_ = false;
};

}  // namespace dtrain

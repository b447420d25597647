// train.profile_steps: LibTorch's own profiler (Kineto) over chosen steps. It records every ATen
// operator the rank runs, on its thread and on autograd's, and on a GPU every kernel and copy with
// its device time, into profile-rank-N.json in the run directory (Chrome's trace format, which
// Perfetto and TensorBoard read; bench/kernel_summary.py sums it by kernel). train.trace records
// dtrain's own actions and collectives; this records what they cost inside LibTorch and on the device.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace dtrain {

class OperatorProfile {
 public:
  // Steps first..last (1-based, inclusive); the trace goes to `path`.
  OperatorProfile(int64_t first, int64_t last, std::string path, at::Device device);
  ~OperatorProfile();
  OperatorProfile(const OperatorProfile&) = delete;
  OperatorProfile& operator=(const OperatorProfile&) = delete;

  // Around each step: starts recording before `first`, and after `last` stops and writes the trace,
  // returning a line for the log (empty otherwise).
  void step_begins(int64_t step);
  std::string step_ends(int64_t step);

 private:
  int64_t first_, last_;
  std::string path_;
  at::Device device_;
  bool recording_ = false;
};

}  // namespace dtrain

// train.profile_steps: LibTorch's own profiler (Kineto) over chosen steps. It records every ATen
// operator the rank runs, on its thread and on autograd's, and on a GPU every kernel and copy with
// its device time, into profile-rank-N.json in the run directory (Chrome's trace format, which
// Perfetto and TensorBoard read; bench/kernel_summary.py sums it by kernel). train.trace records
// dtrain's own actions and collectives; this records what they cost inside LibTorch and on the device.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "train/rank_log.h"
#include "train/train_config.h"

namespace dtrain {

class OperatorProfile {
 public:
  // The profile of a start whose first step is `start_step` + 1: null when train.profile_steps is
  // off, or when the start begins past its first step, which is logged as a warning.
  static std::unique_ptr<OperatorProfile> for_start(const TrainConfig& config, int rank, int64_t start_step, at::Device device,
                                                    RankLog& log);
  // Steps first..last (1-based, inclusive); the trace goes to `path`.
  OperatorProfile(int64_t first, int64_t last, std::string path, at::Device device, RankLog& log);
  ~OperatorProfile();
  OperatorProfile(const OperatorProfile&) = delete;
  OperatorProfile& operator=(const OperatorProfile&) = delete;

  // Around each step: starts recording before `first`, and after `last` stops, writes the trace and
  // logs where.
  void step_begins(int64_t step);
  void step_ends(int64_t step);

 private:
  int64_t first_, last_;
  std::string path_;
  at::Device device_;
  RankLog& log_;
  bool recording_ = false;
};

}  // namespace dtrain

// What a run says about its memory: each rank's measured peak during the training steps (tracked
// tensor bytes on the CPU build, the caching allocator's peak allocated and reserved on CUDA;
// train/tensor_memory.h), beside its peak RSS (of the whole process and from the first step on) and the estimate for its own config
// (tools/estimate/memory_estimate.h). At the end of the run every rank logs one line, "memory:
// estimated 2.31 GiB, measured 2.27 GiB, -1.7% (...)", and rank 0 writes every rank's numbers into
// metrics.jsonl as one {"step": N, "memory": {...}} line.
#pragma once
#include <cstdint>

#include "comm/world.h"
#include "tools/estimate/memory_estimate.h"
#include "train/metrics_log.h"
#include "train/rank_log.h"
#include "train/train_config.h"

namespace dtrain {

class MemoryReport {
 public:
  // `pp_stage`: this rank's pipeline stage, whose estimate it is measured against.
  MemoryReport(const TrainConfig& config, World& world, int pp_stage);

  // Around each training step: the measured peak is the highest of the steps, not of what runs
  // between them (validation, checkpoint saves), which the estimate does not cover.
  void step_begins();
  void step_ends();

  // A collective over every rank: logs this rank's line and, on rank 0, writes every rank's numbers
  // after `step` into `metrics` (null elsewhere).
  void finish(int64_t step, RankLog& log, MetricsLog* metrics);

  const MemoryEstimate& estimate() const { return estimate_; }

 private:
  World& world_;
  int pp_stage_;
  MemoryEstimate estimate_;
  int64_t measured_peak_ = 0, reserved_peak_ = 0;
  bool measured_ = false;  // a step ran and the device's tensors are tracked
  // The process's peak RSS is counted again from the first step on (host_memory.h), so that what
  // setting up touched does not stand for what the steps need.
  bool rss_window_started_ = false, steps_rss_measured_ = false;
};

// "estimated 2.31 GiB, measured 2.27 GiB, -1.7%": the measured peak against the estimate, in percent of the estimate.
std::string estimate_against_measured(double estimated, double measured);

}  // namespace dtrain

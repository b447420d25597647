// What the run says about its steps: each step's metrics line (metrics.jsonl, rank 0), the progress
// line every steps_per_print steps (loss, rate, MFU against the measured matmul peak, ETA), and the
// summary at the end.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "train/matmul_peak.h"
#include "train/metrics_log.h"
#include "train/optimizer_step.h"
#include "train/parallelize.h"
#include "train/rank_log.h"
#include "train/step_executor.h"
#include "train/train_config.h"

namespace dtrain {

struct StepOutcome {
  double loss = 0;        // averaged over every rank
  double lr = 0, step_s = 0;
  double loss_scale = 0;  // fp16: the scale this step's loss was multiplied by
  double image_flops = 0;  // the vision side's training FLOPs for the step's images, every rank's
  PassesResult passes;
  UpdateOutcome update;
};

class StepReport {
 public:
  // `metrics` is rank 0's metrics file (null elsewhere).
  StepReport(const TrainConfig& config, RankLog& log, MetricsLog* metrics) : c_(config), log_(log), metrics_(metrics) {}

  // The model FLOP/s all ranks together can reach: train.peak_flops, or measured now (a collective).
  void measure_peak(World& world);
  double peak_flops() const { return peak_.flops(); }

  void step(int64_t step, const StepOutcome& outcome, const ParallelPlan& plan);
  // "done: ..." after `steps` steps in `elapsed` seconds, on `rank`.
  std::string summary(int64_t steps, double elapsed, const ParallelPlan& plan, const StabilityGuard& guard, int64_t rollbacks,
                      int rank) const;

 private:
  void write_metrics(int64_t step, const StepOutcome& out, const ParallelPlan& plan, double tokens_per_s, double achieved, double mfu);

  const TrainConfig& c_;
  RankLog& log_;
  MetricsLog* metrics_;
  MfuPeak peak_;
  double step_seconds_sum_ = 0;
  int64_t steps_timed_ = 0;
  double comm_s_ = 0, hidden_s_ = 0;
};

}  // namespace dtrain

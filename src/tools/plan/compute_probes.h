// What the planner times on the CPU build to price a layout's compute (step_cost.h's flops_rate),
// each shape once however many layouts share it. The GEMM probe (train/matmul_peak.h) at a layout's
// largest matmul gives the peak MFU is against. The model probe runs the model's own parts
// (parallel/pipeline/stage_split.h's LayerCostProbe) at a layout's micro-batch: its rate is what
// the compute sustains, with everything a FLOP count misses and a fixed efficiency cannot see (each
// operator's fixed cost per micro-batch, the norms and elementwise work, the caches): fewer, larger
// micro-batches are not always faster, and only timing says where the turn lies.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/mixed_precision.h"
#include "tools/estimate/memory_layout.h"

namespace dtrain {

// The GEMM probe at a layout's own matmul: a micro-batch's tokens on one rank (T = micro-batch ×
// seq_len / cp) by d_model into d_ff / tp, in `dtype`, on the calling thread count.
class GemmPeakProbe {
 public:
  GemmPeakProbe(at::ScalarType dtype, double seconds) : dtype_(dtype), seconds_(seconds) {}
  double operator()(const MemoryLayout& l);
  size_t shapes() const { return rates_.size(); }

 private:
  at::ScalarType dtype_;
  double seconds_;
  std::map<std::pair<int64_t, int64_t>, double> rates_;
};

// The FLOP/s one rank's share of each layout's step sustains: the model's embedding, one block and
// its head (parallel/pipeline/stage_split.h's LayerCostProbe) timed forward and backward at each
// layout's micro-batch of whole sequences (the matmuls in `mp`'s type), their FLOPs
// (model_layer_costs) over their seconds with n_layer blocks. The micro-batches are timed in turns,
// round after round for at least `seconds`, and each keeps its fastest pass: a busy moment of the
// machine costs one round of every micro-batch, not the whole measure of one, since the ranking
// rests on differences of a few percent between them. Context parallelism keeps whole sequences'
// rate: a rank's queries still meet every key of the sequence, in cp pieces whose partial results
// ring attention merges (measured: timing seq_len / cp tokens instead put cp 2 12% ahead of what it
// ran at). Tensor parallelism keeps the whole width's rate too, which flatters it: its matmuls are
// tp times narrower and its operators as many, and neither is timed (scaling by the GEMM probe's
// narrower shape was tried and put tp 2 40% ahead of what it ran at). `progress` hears one line per
// micro-batch timed.
class ModelRateProbe {
 public:
  ModelRateProbe(const MixedPrecision& mp, double seconds, std::function<void(const std::string&)> progress)
      : mp_(mp), seconds_(seconds), progress_(std::move(progress)) {}
  // One rate per layout; every layout has the same model.
  std::vector<double> operator()(const std::vector<MemoryLayout>& layouts);
  size_t shapes() const { return shapes_; }

 private:
  MixedPrecision mp_;
  double seconds_;
  std::function<void(const std::string&)> progress_;
  size_t shapes_ = 0;
};

// Seconds the optimizer's update (optim/fused_adamw.h, the CPU build's AdamW) takes per parameter on
// the calling thread count: the fastest of a few passes over `elements` parameters. The update reads
// and writes each parameter, its gradient and two moments once, so its time grows with the elements
// and one size stands for every shard.
double time_update_per_parameter(int64_t elements);

}  // namespace dtrain

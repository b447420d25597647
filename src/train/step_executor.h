// The forward and backward passes of one optimizer step, behind an interface: today's executor
// accumulates gradients over micro-batches in turn; a pipeline executor runs a schedule of them
// across stages instead. Either leaves the plan's gradient sync holding the reduced gradients that
// the optimizer step (train/optimizer_step.h) then applies.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "comm/chrome_trace.h"
#include "data/micro_batch_stream.h"
#include "model/transformer.h"
#include "parallel/pipeline/pipeline_runner.h"
#include "train/parallelize.h"

namespace dtrain {

// What one step's passes did on this rank.
struct PassesResult {
  double loss = 0;                  // mean over the step's micro-batches, this rank's alone
  double comm_s = 0, hidden_s = 0;  // gradient reduction, over every synchronised micro-batch
  double model_parallel_wait_s = 0;  // waited for the model-parallel groups' collectives (tp), forward and backward
  double image_flops = 0;            // the vision side's training FLOPs for this rank's images of the step
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Runs the micro-batches of step `step` (counted from 1) forward and backward. With `loss_scale`
  // (fp16) the gradients are those of the loss times that scale.
  virtual PassesResult run(int64_t step, std::optional<double> loss_scale) = 0;
  // The loss of one batch, forward only (validation): the same on every rank of a data-parallel coordinate.
  virtual double loss_of(const Batch& batch) = 0;
};

// Gradient accumulation: `accumulation` micro-batches one after another, the gradients reduced once
// after the last (or after each, where the gradient sync keeps nothing whole to accumulate in).
// Each micro-batch's images go to the model with its tokens (a vision-language model's).
// With a trace (train.trace) each micro-batch's forward and backward are its slices "F" and "B",
// {"mb": k, "chunk": 0}, as a pipeline's actions are.
class AccumulationExecutor : public StepExecutor {
 public:
  AccumulationExecutor(Transformer& model, ParallelPlan& plan, MicroBatchStream& stream, int64_t accumulation, at::Device device,
                       std::optional<at::ScalarType> round_accumulation, ChromeTrace* trace = nullptr)
      : model_(model), plan_(plan), stream_(stream), accumulation_(accumulation), device_(device), round_(round_accumulation),
        trace_(trace) {}
  PassesResult run(int64_t step, std::optional<double> loss_scale) override;
  double loss_of(const Batch& batch) override;

 private:
  // The model's output for `batch`, moved to the run's device.
  at::Tensor forward(const Batch& batch);

  Transformer& model_;
  ParallelPlan& plan_;
  MicroBatchStream& stream_;
  int64_t accumulation_;
  at::Device device_;
  std::optional<at::ScalarType> round_;  // 16-bit accumulation: the running sum is rounded to this type
  ChromeTrace* trace_;                    // null: not traced
};

// Pipeline parallelism: the step's micro-batches run through the stages as the plan's schedule
// says (parallel/pipeline/pipeline_runner.h), their gradients accumulating whole; the data-parallel
// reduction runs once, beside the rank's last backward where that backward covers all it holds
// (one chunk per rank, 1f1b or gpipe, whole gradients), else after it; a tied embedding's copies sum
// their gradients over the embedding group. The loss, computed on the last stage, is shared over
// the pipeline. Text only: a batch with images is an error (a vision-language model refuses pp).
class PipelineExecutor : public StepExecutor {
 public:
  // `boundary`: what one chunk hands the next, for a micro-batch.
  PipelineExecutor(Transformer& model, ParallelPlan& plan, MicroBatchStream& stream, at::Device device, std::vector<int64_t> boundary,
                   ChromeTrace* trace);
  PassesResult run(int64_t step, std::optional<double> loss_scale) override;
  double loss_of(const Batch& batch) override;

 private:
  double over_pipeline(double last_stage_value);
  // The batch's tokens and targets on the run's device; throws when it holds images.
  MicroBatch text_of(const Batch& batch) const;
  void sum_tied_embedding(int64_t step);

  Transformer& model_;
  ParallelPlan& plan_;
  MicroBatchStream& stream_;
  at::Device device_;
  PipelineRunner runner_;
  at::Tensor tied_weight_;  // the tied embedding's copy on this rank, when the embedding group sums its gradient
  bool reduce_in_cool_down_ = false;
};

// The executor the plan calls for: a pipeline's with pp, else gradient accumulation over
// config.accumulation micro-batches.
// Either records its passes in `trace` (null: none).
std::unique_ptr<StepExecutor> make_step_executor(Transformer& model, ParallelPlan& plan, MicroBatchStream& stream, const TrainConfig& config,
                                                 at::Device device, ChromeTrace* trace);

}  // namespace dtrain

// Runs this rank's part of a pipeline schedule (pipeline_schedule.h) over one step's micro-batches:
// the forward and backward passes of its chunks, with activations and their gradients moving between
// stages by point-to-point messages. Receives are posted in the order the schedule gives each channel,
// one compute ahead of the compute that reads them (receives_posted_through), so a transfer lands
// while the rank computes and a step holds a few boundary buffers, not one per micro-batch; sends go
// out asynchronously as soon as what they carry is computed, and are let go where the schedule shows
// the peer has read them (sends_delivered_by), the rest at the end of the step.
// Message shapes come from the config (the boundary shape), never from a message. Under zero_bubble
// a backward is split: I computes the input gradient the previous stage waits for, leaving the
// linear layers' weight-gradient GEMMs in a store (model/weight_grad_store.h) that W runs later.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "comm/chrome_trace.h"
#include "comm/collectives.h"
#include "model/loss.h"
#include "model/transformer.h"
#include "model/weight_grad_store.h"
#include "parallel/pipeline/pipeline_stages.h"

namespace dtrain {

struct MicroBatch {
  at::Tensor input, target;  // tokens [batch, T] and next tokens [batch, T], on the run's device
};

// What a step's caller runs at two points of this rank's actions (either may be empty).
struct StepHooks {
  std::function<void()> after_first_compute;  // the rank's first action is done (a fault-injection point: ckpt/crash_points.h)
  // The rank's last action is a whole backward, about to start: with one chunk per rank it is the
  // last micro-batch's through every parameter the rank holds, so a data-parallel reduction can run
  // beside it (the cool-down's overlap).
  std::function<void()> before_last_backward;
};

class PipelineRunner {
 public:
  // `boundary`: the shape of what a chunk hands the next ([micro-batch, this rank's sequence, d_model]),
  // in `options`' dtype and device. Each compute action is a slice of `trace` (null: none).
  PipelineRunner(Transformer& model, const PipelineStages& stages, std::vector<int64_t> boundary, at::TensorOptions options,
                 ChromeTrace* trace = nullptr);

  // Forward and backward of every micro-batch of `batches` (the schedule's count), the gradient of
  // micro-batch k's loss times `loss_factors[k]` accumulating into the parameters' gradients.
  // Returns the sum of the losses on the rank that holds the last chunk, 0 elsewhere.
  double train(const std::vector<MicroBatch>& batches, const LossFunction& loss, const std::vector<double>& loss_factors,
               const StepHooks& hooks = {});
  // The loss of one micro-batch, forward only, through the chunks in order: on the rank that holds
  // the last chunk, 0 elsewhere.
  double evaluate(const MicroBatch& batch, const LossFunction& loss);

 private:
  struct Slot {
    at::Tensor input;   // what the chunk took, when it needs its gradient (every chunk but the first)
    at::Tensor output;  // what it handed on, with its graph (the loss, for the last chunk)
  };
  using Key = std::pair<int, int>;  // (micro-batch, chunk)

  void post_receive(const PipelineAction& a);                  // if `a` is a receive
  void arrived(PipelineAction::Kind kind, int mb, int chunk);  // waits for a receive, if this rank posted it
  at::Tensor received(PipelineAction::Kind kind, int mb, int chunk);
  at::Tensor chunk_input(const std::vector<MicroBatch>& batches, int mb, int chunk);
  void forward(const std::vector<MicroBatch>& batches, const LossFunction& loss, int mb, int chunk, at::Tensor& loss_sum);
  void backward(int mb, int chunk, double loss_factor);
  // actions[i] of this rank's list, a compute.
  void compute(size_t i, const std::vector<MicroBatch>& batches, const LossFunction& loss, const std::vector<double>& loss_factors,
               at::Tensor& loss_sum);
  void send(size_t i, const at::Tensor& t, int peer, const std::string& label);  // actions[i], a send
  void release_sends(size_t i);  // waits for and drops the sends delivered by the compute actions[i]
  bool local(int chunk) const { return chunk >= 0 && chunk < int(stages_.chunks.size()) && stages_.schedule.rank_of(chunk) == me_; }

  Transformer& model_;
  const PipelineStages& stages_;
  std::vector<int64_t> boundary_;
  at::TensorOptions options_;
  int me_ = 0, last_ = 0;
  std::map<Key, Slot> slots_;
  std::map<std::pair<int, Key>, std::pair<at::Tensor, CommHandle>> receives_;  // (kind, key) -> buffer, its receive
  std::vector<size_t> delivered_by_;                           // sends_delivered_by, per action index
  std::map<size_t, std::pair<at::Tensor, CommHandle>> sends_;  // by action index: payload, its send
  std::map<Key, WeightGradStore> deferred_;  // zero_bubble: each I's weight gradients, until its W
  ChromeTrace* trace_;
};

}  // namespace dtrain

// Data parallelism (DDP): every rank holds the whole model, parameters start equal (broadcast from
// rank 0), and gradients are averaged across the group during backward. A hook on each
// parameter's gradient accumulator counts gradients into their bucket; once a bucket is complete
// (and every bucket before it, so all ranks launch in the same order) its all-reduce starts
// asynchronously while backward goes on. finish_gradient_sync() then waits for what is left.
// For gradient accumulation, set_sync(false) on all but the last micro-step (PyTorch's no_sync):
// gradients then only accumulate locally.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "comm/collectives.h"
#include "optim/flat_parameters.h"
#include "parallel/ddp/completion_watcher.h"
#include "parallel/ddp/grad_bucket.h"
#include "parallel/ddp/overlap_tracker.h"

namespace torch::autograd { struct Node; }

namespace dtrain {

struct DataParallelOptions {
  int64_t bucket_bytes = 25 * 1000 * 1000;  // reduce_bucket_size (DeepSpeed counts it in elements; see docs/config.md)
  // The type gradients travel in: the gradients' own, or a 16-bit type they are rounded to
  // (data_types.grad_accum_dtype), which halves the bytes sent.
  std::optional<at::ScalarType> wire_dtype;
};

class DataParallel {
 public:
  DataParallel(FlatParameters& params, std::shared_ptr<Group> group, DataParallelOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Makes every rank's parameters rank 0's: the flat buffer and `others` (e.g. frozen parameters).
  void broadcast_parameters(const std::vector<at::Tensor>& others);

  // Whether the next backward reduces gradients (true) or only accumulates them (no_sync).
  void set_sync(bool sync) { sync_ = sync; }
  // Call before a synchronising backward: starts the step's trace.
  void begin_backward();
  // Launches buckets backward did not complete (unused parameters), waits for every all-reduce,
  // and returns when the flat gradient holds the group average.
  void finish_gradient_sync();

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // The trace of the last synchronised backward.
  const StepOverlap& last_overlap() const { return tracker_.last(); }

 private:
  void on_grad_ready(int entry);
  void launch_ready_buckets();
  void launch(int bucket);

  FlatParameters& params_;
  std::shared_ptr<Group> group_;
  std::vector<GradBucket> buckets_;
  std::vector<int> bucket_of_entry_;
  std::vector<int> ready_in_bucket_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: they hold our hooks
  std::optional<at::ScalarType> wire_dtype_;
  std::vector<at::Tensor> wire_;  // per bucket, in wire_dtype_: what was sent, reduced in place
  int next_bucket_ = 0;
  bool sync_ = true;
  OverlapTracker tracker_;
  CompletionWatcher watcher_;  // last member: its thread stops before the tracker goes
};

}  // namespace dtrain

// What data parallelism and ZeRO's gradient sharding share: a hook on each parameter's gradient
// accumulator counts gradients into their bucket; once a bucket is complete (and every bucket before it, so all ranks launch in the same order) its
// reduction starts asynchronously while backward goes on. finish_gradient_sync() launches what
// backward left incomplete and waits for the rest. Subclasses say what reducing a bucket means:
// an all-reduce of the flat gradient (DataParallel) or a reduce-scatter into this rank's shard
// (ReduceScatterGrads).
#pragma once
#include <memory>
#include <vector>

#include "comm/collectives.h"
#include "optim/flat_parameters.h"
#include "parallel/ddp/completion_watcher.h"
#include "parallel/ddp/grad_bucket.h"
#include "parallel/ddp/overlap_tracker.h"

namespace torch::autograd { struct Node; }

namespace dtrain {

class BucketedGradSync {
 public:
  // These buckets (make_grad_buckets, or ZeRO-3's units): consecutive runs of params.entries() that cover them all.
  BucketedGradSync(FlatParameters& params, std::shared_ptr<Group> group, std::vector<GradBucket> buckets);
  virtual ~BucketedGradSync();
  BucketedGradSync(const BucketedGradSync&) = delete;
  BucketedGradSync& operator=(const BucketedGradSync&) = delete;

  // True when every micro-batch's backward must be reduced: nothing whole is kept to accumulate in.
  virtual bool reduces_every_micro_batch() const = 0;
  // Whether the next backward reduces gradients (true) or only accumulates them (no_sync), and
  // whether it is the optimizer step's last.
  void set_sync(bool sync, bool ends_step = true) {
    sync_ = sync;
    ends_step_ = ends_step;
  }
  // Call before a synchronising backward: starts its trace.
  void begin_backward();
  // Call after a synchronising backward: launches buckets backward did not complete (unused
  // parameters), and returns when every reduction is done.
  void finish_gradient_sync();

  // Forgets the gradients of the last step.
  virtual void zero_grad() = 0;
  // Whether zero_grad() does nothing but zero grads(), so that an update that leaves grads() zero
  // spares it that pass (a shard of the gradient is overwritten by its reduce-scatter instead).
  virtual bool zeroes_grads_only() const { return false; }
  // Says the update left grads() zero: the next zero_grad() has nothing left to do.
  virtual void grads_left_zero() {}
  // The reduced gradients this rank holds after finish_gradient_sync(): the whole flat gradient or
  // this rank's shard of it.
  virtual at::Tensor& grads() = 0;
  // The group over which grads() is sharded, whose norms must be summed; null when it is whole.
  virtual Group* shard_group() = 0;

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // The trace of the last synchronised backward.
  const StepOverlap& last_overlap() const { return tracker_.last(); }

 protected:
  // Starts reducing `bucket`, whose gradients are all final.
  virtual CommHandle reduce(int bucket) = 0;
  // Runs on the watcher thread once `bucket`'s reduction is complete.
  virtual void reduced(int /*bucket*/) {}
  // Runs on the owner's thread once every reduction of a backward is complete.
  virtual void every_bucket_reduced() {}
  // `buckets` get their gradients from the caller, not from autograd's hooks (a parameter cut into
  // buckets of rows, whose reader hands each block's gradient over): launch_fed(b) starts one, in
  // whatever order the caller hands them over (the same on every rank), and one not handed over by
  // the end of a backward is launched then, from what its parameter holds.
  void fed_by_caller(const std::vector<int>& buckets);
  void launch_fed(int bucket);
  // Blocks until at most `buckets` reductions are incomplete; rethrows a failed one's error.
  void wait_for_reductions(int buckets) { watcher_.wait_until_at_most(buckets); }

  FlatParameters& params_;
  std::shared_ptr<Group> group_;
  std::vector<GradBucket> buckets_;
  bool ends_step_ = true;

 private:
  void on_grad_ready(int entry);
  void launch_ready_buckets();
  void launch(int bucket);

  std::vector<int> bucket_of_entry_;
  std::vector<int> ready_in_bucket_;
  std::vector<bool> fed_, fed_launched_;  // per bucket: fed_by_caller, and launched in this backward
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: they hold our hooks
  int next_bucket_ = 0;
  bool sync_ = true;
  OverlapTracker tracker_;
  CompletionWatcher watcher_;  // last member: its thread stops before the tracker goes
};

}  // namespace dtrain

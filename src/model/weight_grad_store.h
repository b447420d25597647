// Deferred weight gradients, for the zero-bubble pipeline schedule (Qi et al., "Zero Bubble
// Pipeline Parallelism"): its backward of a micro-batch is split into I, the input gradients the
// previous stage waits for, and W, the weight gradients nobody waits for, run later to fill the
// pipeline's bubble. While a DeferWeightGrads guard is alive, the backward of the model's linear
// layers (linear_fp32, mixed_linear) computes the input and bias gradients at once and leaves each
// weight-gradient GEMM in the store, holding the layer's input (detached: its autograd history would
// keep the graph behind it alive) and output gradient until then;
// WeightGradStore::run() computes them in the order backward left them and adds each to its
// weight's .grad() as autograd's accumulation would, so the gradients are the same bits (see run()).
//
// Tensor parallelism's column-parallel layers (parallel/tensor/column_parallel_linear.h) keep
// computing their weight gradients in backward: those GEMMs are what hides the input gradient's
// all-reduce there, and under sequence parallelism they read an input gathered again in backward.
// Under tp only the row-parallel layers' weight gradients are deferred.
//
// The guard is process-wide, not per thread: the autograd engine runs a CUDA graph's backward on
// its device threads, which a thread-local would not reach. Only one guard may be alive at a time,
// and nothing else may run a backward meanwhile (a rank has one training thread).
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace dtrain {

class WeightGradStore {
 public:
  // Computes one weight gradient, of the weight's shape (fp32 for a 16-bit layer's fp32 master).
  using Compute = std::function<at::Tensor()>;

  WeightGradStore() = default;
  WeightGradStore(const WeightGradStore&) = delete;
  WeightGradStore& operator=(const WeightGradStore&) = delete;

  // Called from a linear layer's backward: `weight` is the leaf parameter the gradient belongs to.
  void defer(const at::Tensor& weight, Compute compute);

  // Computes every deferred gradient in the order deferred and adds it to its weight's .grad():
  // in place when .grad() is defined (it may be a view into a flat buffer, which must stay the
  // same storage), else .grad() becomes it. Runs without grad mode; the store is empty afterwards.
  // Autograd's post-accumulation hooks do not fire: whoever runs W reduces the gradients after it.
  // The sum is autograd's, term by term, except for a weight that also gets a gradient through
  // another path in the same backward (the output head tied to the token embedding): autograd adds
  // the two before accumulating, here they are accumulated one after the other, which rounds alike
  // only when that weight's .grad() starts the backward at zero or undefined.
  void run();

  // Drops what is deferred without computing it (an abandoned step).
  void clear() { pending_.clear(); }
  size_t size() const { return pending_.size(); }
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    at::Tensor weight;
    Compute compute;
  };
  std::vector<Pending> pending_;
};

// While alive, linear layers' weight gradients go to `store` instead of autograd. Not nestable.
class DeferWeightGrads {
 public:
  explicit DeferWeightGrads(WeightGradStore& store);
  ~DeferWeightGrads();
  DeferWeightGrads(const DeferWeightGrads&) = delete;
  DeferWeightGrads& operator=(const DeferWeightGrads&) = delete;
};

// The store a guard has made current, or null: the undeferred backward.
WeightGradStore* deferred_weight_grads();

}  // namespace dtrain

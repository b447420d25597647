// ColumnParallelLinear: linear layers that read one input and each compute a slice of their output
// features over the tensor-parallel group (Megatron-LM's ColumnParallelLinear; a block's q, k and v,
// its gate and up, the output head). Each rank holds the rows of the weight (and bias) for its slice,
// so the forward pass needs no communication; in backward every rank's slice contributes to the
// input's gradient, which is all-reduced over the group. The layers that share an input run as one
// autograd function, so that this is one all-reduce per sub-layer rather than one per layer, and it
// is started as soon as the input gradient is computed and waited for only after the weight-gradient
// GEMMs, which it hides behind (Megatron's LinearWithGradAccumulationAndAsyncCommunication); without
// `overlap` it is waited for at once, which bench/tensor_parallel.sh compares.
//
// Under sequence parallelism the input is this rank's shard of the sequence: it is all-gathered
// before the GEMMs, and the input gradient is reduce-scattered back to the shard instead of
// all-reduced. The gathered input is not kept for backward: it is gathered again there, behind the
// input-gradient GEMMs, so that a rank keeps only its shard (Megatron does the same).
//
// A layer may instead hold its whole weight and compute some of its rows (key/value heads that
// several ranks share when tp exceeds their count): its weight gradient, a partial sum on each rank,
// is all-reduced over the group in backward so every holder applies the same update.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "comm/group.h"
#include "model/linear.h"

namespace dtrain {

class ColumnParallelLinear {
 public:
  struct Rows {
    int64_t begin = 0, count = 0;
  };

  ColumnParallelLinear(std::shared_ptr<Group> group, bool sequence_parallel, bool overlap = true)
      : group_(std::move(group)), sequence_parallel_(sequence_parallel), overlap_(overlap) {}

  // `layer` keeps its whole weight and computes rows [begin, begin + count) of it.
  void compute_rows(const LinearImpl* layer, Rows rows) { rows_[layer] = rows; }

  // Each layer's output for input x [B, T, in] (under sequence parallelism [B, T/tp, in]), in order:
  // [B, T, its features on this rank]. The layers share one precision.
  std::vector<at::Tensor> operator()(const at::Tensor& x, const std::vector<LinearImpl*>& layers) const;

 private:
  std::shared_ptr<Group> group_;
  bool sequence_parallel_, overlap_;
  std::map<const LinearImpl*, Rows> rows_;
};

}  // namespace dtrain

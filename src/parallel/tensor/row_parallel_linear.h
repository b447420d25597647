// RowParallelLinear: a linear layer whose ranks each hold a slice of its input features, the columns
// of its weight (Megatron-LM's RowParallelLinear; a block's o_proj and down_proj, which read the
// heads or the MLP features a column-parallel layer left split). Each rank's product is a partial
// sum of the output, summed over the tensor-parallel group in forward; its gradient is whole on every
// rank already, so backward needs no communication. The bias is added after the sum, once.
//
// Under sequence parallelism the sum is a reduce-scatter that leaves each rank its shard of the
// sequence, and the bias is added to that shard: its gradient is then a partial sum on each rank,
// summed over the group in backward.
#pragma once
#include <memory>

#include "comm/group.h"
#include "model/linear.h"

namespace dtrain {

class RowParallelLinear {
 public:
  RowParallelLinear(std::shared_ptr<Group> group, bool sequence_parallel) : group_(std::move(group)), sequence_parallel_(sequence_parallel) {}

  // Makes `layer` (already holding its columns) reduce its output over the group.
  void apply_to(LinearImpl& layer) const;

 private:
  std::shared_ptr<Group> group_;
  bool sequence_parallel_;
};

}  // namespace dtrain

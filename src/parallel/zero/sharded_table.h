// ZeRO stage 3's token table read by row blocks (model/row_blocked_table.h): each block is a unit of
// its own (parameter_units.h's RowSplit), gathered by FullyShardedParameters when the lookup or the
// head reads it and freed after, and each block's gradient goes to ReduceScatterGrads as soon as the
// head's backward has it, so that neither the gathered table nor its gradient is ever whole.
#pragma once
#include <vector>

#include "optim/flat_parameters.h"

#include "model/row_blocked_table.h"
#include "parallel/zero/fully_sharded_parameters.h"
#include "parallel/zero/parameter_units.h"
#include "parallel/zero/reduce_scatter_grads.h"

namespace dtrain {

class ShardedTable : public RowBlockedTable {
 public:
  // The table `split` names among the flat layout's `entries`, over the units of its rows that
  // `params` made of `units` (parameter_units.h), in order.
  ShardedTable(FullyShardedParameters& params, ReduceScatterGrads& grads, const std::vector<GradBucket>& units,
               const std::vector<FlatEntry>& entries, const RowSplit& split);

  int blocks() const override { return int(units_.size()); }
  int64_t largest_block_numel() const { return largest_numel_; }
  int64_t first_row(int block) const override { return first_row_[size_t(block)]; }
  void prefetch(int block) override { params_.prefetch_unit(units_[size_t(block)]); }
  at::Tensor acquire(int block) override;
  void release(int block) override { params_.release_unit(units_[size_t(block)]); }
  void block_gradient(int block, at::Tensor grad) override { grads_.feed(units_[size_t(block)], std::move(grad)); }
  void row_gradients(const at::Tensor& rows, const at::Tensor& grads) override { grads_.feed_rows(rows, grads); }

 private:
  FullyShardedParameters& params_;
  ReduceScatterGrads& grads_;
  std::vector<int> units_;
  std::vector<int64_t> first_row_;  // per block, and the table's rows after the last
  int64_t row_numel_;
  int64_t largest_numel_ = 0;
};

}  // namespace dtrain

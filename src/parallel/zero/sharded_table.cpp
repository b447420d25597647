#include "parallel/zero/sharded_table.h"

namespace dtrain {

ShardedTable::ShardedTable(FullyShardedParameters& params, ReduceScatterGrads& grads, const std::vector<GradBucket>& units,
                           std::vector<int> row_units, const FlatEntry& entry, int entry_index, int64_t row_numel)
    : params_(params), grads_(grads), units_(std::move(row_units)), row_numel_(row_numel) {
  for (int u : units_) first_row_.push_back((units[size_t(u)].offset - entry.offset) / row_numel);
  first_row_.push_back(entry.numel / row_numel);
  grads_.feed_by_rows(units_, entry_index, row_numel);
}

at::Tensor ShardedTable::acquire(int block) {
  return params_.acquire_unit(units_[size_t(block)]).view({-1, row_numel_});
}

}  // namespace dtrain

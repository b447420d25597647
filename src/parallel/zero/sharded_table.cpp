#include "parallel/zero/sharded_table.h"

#include <algorithm>

namespace dtrain {

ShardedTable::ShardedTable(FullyShardedParameters& params, ReduceScatterGrads& grads, const std::vector<GradBucket>& units,
                           const std::vector<FlatEntry>& entries, const RowSplit& split)
    : params_(params), grads_(grads), row_numel_(split.row_numel) {
  const auto entry = std::find_if(entries.begin(), entries.end(), [&](const FlatEntry& e) { return e.name == split.name; });
  TORCH_CHECK(entry != entries.end(), "the flat layout has no entry '", split.name, "' to read by rows");
  for (int u = 0; u < int(units.size()); ++u)
    if (params.is_row_unit(u)) {
      units_.push_back(u);
      first_row_.push_back((units[size_t(u)].offset - entry->offset) / row_numel_);
      largest_numel_ = std::max(largest_numel_, units[size_t(u)].numel);
    }
  first_row_.push_back(entry->numel / row_numel_);
  grads_.feed_by_rows(units_, int(entry - entries.begin()), row_numel_);
}

at::Tensor ShardedTable::acquire(int block) {
  return params_.acquire_unit(units_[size_t(block)]).view({-1, row_numel_});
}

}  // namespace dtrain

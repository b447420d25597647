#include "parallel/zero/flat_shard.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtrain {

FlatShard::FlatShard(int64_t n, int r, int rank) : numel(n), ranks(r) {
  if (r < 1 || rank < 0 || rank >= r)
    throw std::invalid_argument("FlatShard: rank " + std::to_string(rank) + " of " + std::to_string(r) + " ranks");
  shard_len = (n + r - 1) / r;
  begin = std::min(n, shard_len * rank);
  local_len = std::clamp<int64_t>(n - begin, 0, shard_len);
}

}  // namespace dtrain

// Which elements of a flat buffer one rank of a data-parallel group owns under ZeRO: the buffer is
// padded to a multiple of the group size and cut into equal contiguous shards, rank r holding the
// r-th (DeepSpeed's flat partitioning; the "flat range" placement of the sharded-state model).
// Equal shards let one all-gather rebuild the buffer; the padding lives only in the collective's
// scratch, never in the buffer.
#pragma once
#include <cstdint>

namespace dtrain {

struct FlatShard {
  int64_t numel = 0;      // the whole buffer
  int ranks = 1;
  int64_t shard_len = 0;  // every rank's share of the padded buffer: ceil(numel / ranks)
  int64_t begin = 0;      // where this rank's share starts
  int64_t local_len = 0;  // how much of it lies inside the buffer (less on the last ranks when padded)

  FlatShard(int64_t numel, int ranks, int rank);
  int64_t padded() const { return shard_len * ranks; }
};

}  // namespace dtrain

#include "parallel/zero/bucket_shards.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtrain {

BucketShards::BucketShards(const std::vector<GradBucket>& buckets, int ranks, int rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::invalid_argument("BucketShards: rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " ranks");
  for (const auto& b : buckets) {
    ShardPiece p;
    p.bucket_offset = b.offset;
    p.bucket_numel = b.numel;
    p.whole = b.whole;
    const int parts = b.whole ? 1 : ranks, part = b.whole ? 0 : rank;
    p.piece = (b.numel + parts - 1) / parts;
    p.padded_numel = p.piece * parts;
    const int64_t start = std::min(b.numel, p.piece * part);
    p.begin = b.offset + start;
    p.local = std::clamp<int64_t>(b.numel - start, 0, p.piece);
    p.shard_offset = shard_numel_;
    shard_numel_ += p.piece;
    owned_numel_ += p.local;
    numel_ = std::max(numel_, b.offset + b.numel);
    pieces_.push_back(p);
  }
}

}  // namespace dtrain

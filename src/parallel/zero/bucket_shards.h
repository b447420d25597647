// Which elements of the flat parameter buffer one rank of a data-parallel group owns under ZeRO:
// 1/dp of every gradient bucket (Megatron's distributed-optimizer layout; the "flat range"
// placement of the sharded-state model). A bucket of n elements is cut into dp equal pieces of
// ceil(n/dp), rank r holding the r-th, so each bucket is one real reduce-scatter of its gradients
// and one all-gather of its updated parameters, launched as soon as that bucket is ready. The
// padding that makes the pieces equal lives only in the collectives' buffers, never in the flat
// buffer; in this rank's shard (its pieces end to end) it stays zero.
//
// A bucket marked whole (parallel.modules zero_stage 0) is not cut: every rank's piece is all of it,
// with no padding, so each rank updates and holds the whole bucket and its optimizer state, and its
// gradients are averaged by an all-reduce instead of a reduce-scatter.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/ddp/grad_bucket.h"

namespace dtrain {

struct ShardPiece {
  int64_t bucket_offset = 0, bucket_numel = 0;  // the bucket, in the flat buffer
  int64_t piece = 0;         // every rank's share of the padded bucket: ceil(bucket_numel / dp)
  int64_t padded_numel = 0;  // piece * dp (a whole bucket: its numel): what the bucket's collectives carry
  int64_t begin = 0;         // where this rank's share starts in the flat buffer
  int64_t local = 0;         // how much of it lies inside the bucket (less on the last ranks when padded)
  int64_t shard_offset = 0;  // where it starts in this rank's shard
  bool whole = false;        // the bucket is kept whole: its piece is all of it on every rank
};

class BucketShards {
 public:
  BucketShards(const std::vector<GradBucket>& buckets, int ranks, int rank);
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  int64_t numel() const { return numel_; }               // the whole flat buffer
  int64_t shard_numel() const { return shard_numel_; }   // this rank's shard, padding included (equal on every rank)
  int64_t owned_numel() const { return owned_numel_; }   // the elements of the buffer this rank owns (whole buckets included)

 private:
  std::vector<ShardPiece> pieces_;
  int64_t numel_ = 0, shard_numel_ = 0, owned_numel_ = 0;
};

}  // namespace dtrain

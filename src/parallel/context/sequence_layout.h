// How one sequence of seq_len tokens is dealt over the cp ranks of context parallelism. Ulysses
// needs each rank's tokens to be one contiguous run (its all-to-all rebuilds the sequence by
// concatenating rank parts). Causal ring attention wants "zigzag": 2*cp chunks, rank r holding
// chunks r and 2cp-1-r, so that every rank's queries see the same number of earlier keys and the
// ring's work is even (causal_score_blocks in ring_attention.h states the count).
//
// A rank's local tokens are its chunks concatenated in ascending order, so local order is global
// order restricted to the rank: a causal mask over a rank's own tokens is the global one.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dtrain {

struct SequenceLayout {
  int64_t seq_len = 0;
  int cp = 1, rank = 0;
  bool zigzag = false;  // true: 2*cp chunks, rank r holds chunks r and 2cp-1-r (in that order); false: cp chunks, rank r holds chunk r

  // std::invalid_argument naming model.seq_len and parallel.cp when seq_len % chunks() != 0, or a cp
  // or rank out of range.
  static SequenceLayout make(int64_t seq_len, int cp, int rank, bool zigzag);

  int chunks() const { return zigzag ? 2 * cp : cp; }
  int64_t chunk_len() const { return seq_len / chunks(); }
  // The chunk indices rank r holds, in the order its local tokens hold them (ascending).
  std::vector<int> chunks_of(int r) const;
  int64_t local_len() const { return seq_len / cp; }
  // int64 [local_len]: the global positions of this rank's tokens, in local order.
  at::Tensor positions(at::Device device) const;
  // This rank's tokens of a whole sequence along `dim` (a contiguous copy).
  at::Tensor take(const at::Tensor& whole, int64_t dim = 1) const;
};

}  // namespace dtrain

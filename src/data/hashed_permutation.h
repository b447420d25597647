// A permutation of [0, n) computed one index at a time, in O(1) memory: a keyed Feistel network on
// the smallest power of two of at least n elements, with cycle-walking (an image at or past n is
// permuted again until it lands inside [0, n), which a bijection of the larger range guarantees).
// Any index's image is computed on its own, so an epoch's order costs no memory whatever n is.
#pragma once
#include <array>
#include <cstdint>

#include "common/hash64.h"

namespace dtrain {

class HashedPermutation {
 public:
  // `key` picks the permutation (the sampler passes seed + epoch).
  HashedPermutation(int64_t n, uint64_t key);
  // The image of i, for i in [0, n).
  int64_t operator()(int64_t i) const;

 private:
  uint64_t encrypt(uint64_t x) const;

  static constexpr int kRounds = 6;
  int64_t n_;
  int high_bits_, low_bits_;  // the Feistel halves: the value is high << low_bits | low
  std::array<uint64_t, kRounds> round_keys_;
};

}  // namespace dtrain

#include "data/hashed_permutation.h"

#include <stdexcept>
#include <utility>
#include <string>

namespace dtrain {

HashedPermutation::HashedPermutation(int64_t n, uint64_t key) : n_(n) {
  if (n < 1) throw std::invalid_argument("hashed permutation of " + std::to_string(n) + " elements");
  int bits = 2;  // at least one bit per half, so that every round mixes something
  while ((int64_t(1) << bits) < n) ++bits;
  high_bits_ = bits / 2;
  low_bits_ = bits - high_bits_;
  uint64_t k = splitmix64(key);
  for (auto& round_key : round_keys_) round_key = k = splitmix64(k);
}

// An unbalanced Feistel network: each round moves the low half up and replaces it with the high
// half xor a keyed hash of the low half, so the halves' widths swap every round and every round is
// invertible (the hash is recomputed from the half that moved up). The composition is a bijection
// of [0, 2^(high_bits + low_bits)).
uint64_t HashedPermutation::encrypt(uint64_t x) const {
  int high_bits = high_bits_, low_bits = low_bits_;
  uint64_t high = x >> low_bits, low = x & ((uint64_t(1) << low_bits) - 1);
  for (uint64_t round_key : round_keys_) {
    const uint64_t mixed = (high ^ splitmix64(low ^ round_key)) & ((uint64_t(1) << high_bits) - 1);
    high = low;
    low = mixed;
    std::swap(high_bits, low_bits);
  }
  return high << low_bits | low;
}

int64_t HashedPermutation::operator()(int64_t i) const {
  if (i < 0 || i >= n_) throw std::out_of_range("index " + std::to_string(i) + " of a permutation of " + std::to_string(n_));
  uint64_t x = uint64_t(i);
  do x = encrypt(x);
  while (x >= uint64_t(n_));
  return int64_t(x);
}

}  // namespace dtrain

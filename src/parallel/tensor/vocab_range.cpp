#include "parallel/tensor/vocab_range.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dtrain {

std::pair<int64_t, int64_t> vocab_range(int64_t vocab, int tp, int rank) {
  if (tp < 1) throw std::invalid_argument("vocab_range: tp is " + std::to_string(tp) + ", must be at least 1");
  if (rank < 0 || rank >= tp)
    throw std::invalid_argument("vocab_range: tp rank " + std::to_string(rank) + " is outside [0, " + std::to_string(tp) + ")");
  const int64_t rows = (vocab + tp - 1) / tp;
  // The last rank starts furthest in; it holds a row exactly when it starts before the end.
  if (vocab < 1 || rows * (tp - 1) >= vocab)
    throw std::invalid_argument("a vocabulary of " + std::to_string(vocab) + " rows split over tp " + std::to_string(tp) +
                                " in chunks of " + std::to_string(rows) + " (as torch.chunk splits it) leaves tp rank " +
                                std::to_string(tp - 1) + " without a row; tensor parallelism needs a smaller tp");
  const int64_t begin = rows * rank;
  return {begin, std::min(begin + rows, vocab)};
}

}  // namespace dtrain

// Which rows of the vocabulary a tensor-parallel rank holds. The vocabulary is split without padding,
// as torch.chunk splits a tensor: ceil(vocab / tp) rows per rank in rank order, the last rank the
// rest, so ranks may hold different widths (50257 over 2: 25129 and 25128). Every rank must hold at
// least one row; a split that would leave a rank none (vocab 5 over tp 4: 2, 2, 1 and 0) is refused.
// Pure arithmetic: the embedding's rows and the output head's columns follow it alike.
#pragma once
#include <cstdint>
#include <utility>

namespace dtrain {

// [begin, end) of tp rank `rank`'s rows. Throws std::invalid_argument naming vocab, tp and the rank
// when tp < 1, rank is outside [0, tp), or some rank would hold no row.
std::pair<int64_t, int64_t> vocab_range(int64_t vocab, int tp, int rank);

}  // namespace dtrain

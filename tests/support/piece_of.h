// What a read of a piece must return: `piece` of the whole tensor `t`, in the piece's order.
#pragma once
#include <ATen/ATen.h>

#include "parallel/placement.h"

namespace dtrain::test {

inline at::Tensor piece_of(const at::Tensor& t, const LocalPiece& piece) {
  at::Tensor v = t;
  for (size_t d = 0; d < piece.box.size.size(); ++d) v = v.narrow(int64_t(d), piece.box.offset[d], piece.box.size[d]);
  const auto [begin, end] = flat_range(piece);
  return v.reshape({-1}).narrow(0, begin, end - begin);
}

}  // namespace dtrain::test

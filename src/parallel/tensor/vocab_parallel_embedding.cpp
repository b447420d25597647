#include "parallel/tensor/vocab_parallel_embedding.h"

#include <stdexcept>
#include <string>

#include "comm/mappings.h"

namespace dtrain {

at::Tensor vocab_parallel_embedding(const at::Tensor& local_weight, const at::Tensor& tokens, int64_t vocab_begin,
                                    const std::shared_ptr<Group>& group) {
  if (local_weight.dim() != 2 || local_weight.size(0) < 1)
    throw std::invalid_argument("vocab_parallel_embedding on group " + group->name() +
                                ": the local weight must be [rows >= 1, dim], got " + std::to_string(local_weight.dim()) + " dims");
  if (tokens.scalar_type() != at::kLong)
    throw std::invalid_argument("vocab_parallel_embedding on group " + group->name() + ": tokens must be int64, got " +
                                std::string(c10::toString(tokens.scalar_type())));
  const at::Tensor outside = (tokens < vocab_begin).logical_or_(tokens >= vocab_begin + local_weight.size(0));
  // Row 0 stands in for the tokens held elsewhere; their vectors are zeroed after the lookup, which
  // also zeroes what backward would add to row 0 for them.
  const at::Tensor rows = (tokens - vocab_begin).masked_fill_(outside, 0);
  const at::Tensor partial = at::embedding(local_weight, rows).masked_fill(outside.unsqueeze(-1), 0);
  return reduce_from_group(partial, group);
}

}  // namespace dtrain

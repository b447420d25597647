// An embedding whose table is split by rows over a tensor-parallel group (Megatron's
// VocabParallelEmbedding, with the rows of parallel/tensor/vocab_range.h). Each rank looks up the
// tokens its rows hold and gives zeros for the others; one all-reduce (sum) over the group makes the
// whole embedding on every rank, since exactly one rank holds each token's row.
#pragma once
#include <ATen/ATen.h>

#include <memory>

#include "comm/group.h"

namespace dtrain {

// `local_weight` [rows, dim] holds rows [vocab_begin, vocab_begin + rows) of the table; `tokens` any
// shape of int64 ids. Returns [tokens..., dim], the same on every rank of `group`. Forward: one
// all-reduce (reduce_from_group); backward: none, and local_weight's gradient reaches only the rows of
// this rank's tokens. A token in no rank's rows embeds as zeros: ids are checked where they are read
// (data/token_dataset.h). Over a group of one this is at::embedding with a mask and no collective.
at::Tensor vocab_parallel_embedding(const at::Tensor& local_weight, const at::Tensor& tokens, int64_t vocab_begin,
                                    const std::shared_ptr<Group>& group);

}  // namespace dtrain

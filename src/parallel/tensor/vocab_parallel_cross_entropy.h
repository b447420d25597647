// The next-token cross-entropy of logits split by vocabulary columns over a tensor-parallel group
// (Megatron's _VocabParallelCrossEntropy), for an output head whose ranks each hold some rows of
// the vocabulary (parallel/tensor/vocab_range.h). The full logits are never built on one rank: per
// token, the maximum logit is all-reduced (max) over the group, then the sum of exp(logit - max) and
// the target's logit (held by one rank, zero on the others) are all-reduced (sum) together, and
// loss = log(sum) - (target logit - max). Backward is (softmax - onehot(target)) / N on this rank's
// columns, from what forward saved, with no communication.
#pragma once
#include <ATen/ATen.h>

#include <memory>

#include "comm/group.h"

namespace dtrain {

// `local_logits` [B, T, V_r] (any float type; computed in fp32, as model/loss.h does) are columns
// [vocab_begin, vocab_begin + V_r) of the full logits; V_r may differ between ranks. `targets` [B, T]
// int64, -100 where a token takes no loss. Returns the mean cross-entropy over the tokens that take
// one, an fp32 scalar, the same on every rank of `group`, equal to next_token_loss of the full
// logits; local_logits' gradient has their dtype.
// Over a group of one (vocab_begin must then be 0) it is next_token_loss itself.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& local_logits, const at::Tensor& targets, int64_t vocab_begin,
                                        const std::shared_ptr<Group>& group);

}  // namespace dtrain

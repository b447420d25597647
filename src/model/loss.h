// The training loss, applied to what the model returns rather than computed inside it: a pipeline's
// last stage, or a head whose logits are split over the vocabulary, computes it where the logits are.
#pragma once
#include <ATen/ATen.h>

#include <functional>

namespace dtrain {

// Mean next-token cross-entropy of logits [batch, T, vocab] against targets [batch, T] (int64), in
// fp32 whatever the logits' type: the log-sum-exp over the vocabulary is where 16 bits lose most.
// On the CPU one fused pass each way (fused/softmax_cross_entropy.h), with the same semantics as
// cross_entropy: rows whose target is -100 are left out of the mean.
at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& targets);

// The loss a run computes from its model's output: next_token_loss, or what a parallelism that
// splits the logits computes in its place.
using LossFunction = std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& targets)>;

}  // namespace dtrain

// Mean softmax cross-entropy of logits [rows, vocab] (fp32, bf16 or fp16, on the CPU) against
// targets [rows] (int64; ignore_index marks a row left out of the sum and of the count), in one
// pass over each row forward and one backward: each row's max, log-sum-exp and loss in fp32, with
// only the logits as given and one fp32 log-sum-exp per row kept for backward, which writes the
// gradient (softmax − onehot)·g/N straight in the logits' type. ATen's cross_entropy, on logits
// widened to fp32, keeps the fp32 copy's log-softmax for backward and makes an fp32 gradient that is
// rounded after; this keeps no fp32 [rows, vocab] tensor at all.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// Whether fused_cross_entropy takes these tensors: CPU logits in fp32, bf16 or fp16 and int64 targets.
bool fused_cross_entropy_applies(const at::Tensor& logits, const at::Tensor& targets);
at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index = -100);

}  // namespace dtrain

// Differentiable communication: the forward/backward pairs that tensor and sequence parallelism are
// written in (Megatron-LM's tensor_parallel/mappings.py, named here by what they do over a group).
// Each is an autograd function over an explicit group: its backward runs the collective that is the
// adjoint of its forward's, on the same group. Each returns its input itself, with no communication
// and no autograd node, when the group has one rank. Collectives go through comm/collectives.h, so
// each is numbered, recorded and named ("copy_to_group backward") in a timeout's diagnosis.
//
// Shapes: n = group size, r = this rank's group rank. The tensor-parallel pair works on the last dim
// (hidden or vocabulary: [B, S, H] -> [B, S, H/n] and back); the sequence-parallel pair on the
// sequence dim, dim 1 of [B, S, H] unless told otherwise. A dim that must split into n equal parts
// and does not is an error naming the group, the dim and its size.
#pragma once
#include <ATen/ATen.h>

#include <memory>

#include "comm/group.h"

namespace dtrain {

// Forward: identity. Backward: all-reduce (sum) of the gradient.
// Megatron's copy_to_tensor_model_parallel_region: where a replicated input enters a layer whose
// ranks each compute part of the output (a column-parallel linear), every rank's part contributes
// to the input's gradient.
at::Tensor copy_to_group(const at::Tensor& x, const std::shared_ptr<Group>& group);

// Forward: all-reduce (sum). Backward: identity.
// Megatron's reduce_from_tensor_model_parallel_region: the partial outputs of a row-parallel linear
// summed into the whole output, whose gradient every rank already holds whole.
at::Tensor reduce_from_group(const at::Tensor& x, const std::shared_ptr<Group>& group);

// Forward: all-gather along the last dim ([..., H/n] -> [..., H], rank k's part at k*H/n).
// Backward: keep this rank's slice of the gradient's last dim.
// Megatron's gather_from_tensor_model_parallel_region: a column-parallel output made whole.
at::Tensor gather_from_group(const at::Tensor& x, const std::shared_ptr<Group>& group);

// Forward: keep this rank's slice of the last dim ([..., H] -> [..., H/n], elements r*H/n ..).
// Backward: all-gather of the gradient along the last dim.
// Megatron's scatter_to_tensor_model_parallel_region: a replicated input split for a row-parallel linear.
at::Tensor scatter_to_group(const at::Tensor& x, const std::shared_ptr<Group>& group);

// Forward: reduce-scatter (sum) along `dim` ([B, S, H] partial sums -> [B, S/n, H] whole, this
// rank's sequence part). Backward: all-gather of the gradient along `dim`.
// Megatron's reduce_scatter_to_sequence_parallel_region: a row-parallel output under sequence
// parallelism, summed and left split by sequence for the norms and dropout that follow.
at::Tensor reduce_scatter_to_sequence(const at::Tensor& x, const std::shared_ptr<Group>& group, int64_t dim = 1);

// Forward: keep this rank's part of `dim` ([B, S, H] -> [B, S/n, H]). Backward: all-gather of the
// gradient along `dim`.
// Megatron's scatter_to_sequence_parallel_region: the embeddings' output, whole on every rank, split
// into the sequence shards the first block's norm runs on.
at::Tensor split_to_sequence(const at::Tensor& x, const std::shared_ptr<Group>& group, int64_t dim = 1);

// Forward: all-gather along `dim` ([B, S/n, H] -> [B, S, H]). Backward: reduce-scatter (sum) of the
// gradient along `dim`.
// Megatron's gather_from_sequence_parallel_region: the sequence made whole before a column-parallel
// linear, every rank of which contributes to the gradient of every position.
at::Tensor gather_from_sequence(const at::Tensor& x, const std::shared_ptr<Group>& group, int64_t dim = 1);

}  // namespace dtrain

// The points where a parallelism changes how a layer computes, without the model knowing which
// parallelism it is (tensor parallelism sets some: parallel/tensor/apply_tp.h; context parallelism
// others: parallel/context/apply_cp.h). Each is empty by default: the layer computes as on one rank.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace dtrain {

class LinearImpl;

// How a layer reads one of its small parameters (a norm's weight and bias, a bias added after an
// output reduction). Empty: as it is. A layer run on a shard of the sequence reads it through a
// mapping whose backward sums its gradient over the shards.
using ParameterView = std::function<at::Tensor(const at::Tensor&)>;

// Linear layers that read the same input (a block's q, k and v; gate and up; the output head) run as
// one call returning their outputs in order, so that a parallelism treats the input once for all of
// them: one all-reduce of its gradient, overlapped with their weight-gradient GEMMs. Empty: each
// layer's own forward.
using InputLinears = std::function<std::vector<at::Tensor>(const at::Tensor& x, const std::vector<LinearImpl*>& layers)>;

// What the embedding's lookup becomes: (weight, indices) → [..., dim]. Empty: at::embedding.
using EmbeddingLookup = std::function<at::Tensor(const at::Tensor& weight, const at::Tensor& indices)>;

// What the hidden states become after the embedding, before the first block (a split into
// sequence shards). Empty: unchanged.
using HiddenMapping = std::function<at::Tensor(const at::Tensor&)>;

// Causal attention of queries q [B, H, T, head_dim] over keys and values [B, KV, T, head_dim] (KV
// divides H; query head h reads key/value head h / (H / KV)), returning [B, H, T, head_dim]. T is this
// rank's part of the sequence when the sequence is split (context parallelism), and the attention is
// over the whole sequence all the same. Empty: ATen's fused attention over the T tokens given.
using AttentionCore = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v)>;

}  // namespace dtrain

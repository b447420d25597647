// What a micro-batch's forward leaves alive for its backward, estimated from the config: the tensors
// autograd saves, counted as tests/benchmarks count them (Korthikanti et al. 2022, under dtrain's
// assumptions: fp32, no dropout, fused attention that keeps no scores). Per token, in elements:
//   a block: both norms' inputs and outputs (4d), q (d), k and v (2·kv_heads·head_dim), attention's
//            output (d) and its log-sum-exp (n_head); GPT-2's MLP keeps GELU's input and output
//            (2·d_ff), Llama's SwiGLU the gate and up outputs, silu(gate) and their product (4·d_ff);
//   the head: the final norm's input and output (2d) and the log-softmax over the vocabulary (V);
//   the embedding: only token ids, counted as nothing.
// GPT-2 at d_ff = 4d is 16d + n_head per token, the 16 of docs/benchmarks.md's count. Under bf16
// some of these are 16-bit, so the fp32 figure is an upper bound there.
#pragma once
#include <cstdint>

#include "model/transformer_config.h"

namespace dtrain {

inline constexpr int64_t kActivationElementBytes = 4;  // fp32

// One block's saved activations for a micro-batch of `micro_batch` sequences, in bytes.
inline int64_t block_activation_bytes(const TransformerConfig& c, int64_t micro_batch) {
  const int64_t d = c.d_model, f = c.ff_dim(), kv = int64_t(c.kv_heads()) * c.head_dim();
  const int64_t per_token = 6 * d + 2 * kv + c.n_head + (c.is_llama() ? 4 : 2) * f;
  return per_token * c.seq_len * micro_batch * kActivationElementBytes;
}

// The final norm's, the head's and the loss's saved activations for a micro-batch, in bytes.
inline int64_t head_activation_bytes(const TransformerConfig& c, int64_t micro_batch) {
  return (2 * int64_t(c.d_model) + c.vocab_size) * c.seq_len * micro_batch * kActivationElementBytes;
}

}  // namespace dtrain

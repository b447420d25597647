// Attention of one query block against one key/value block, with the log-sum-exp of its scores: the
// unit that ring attention merges across the blocks it sees (ring_attention.h). Each call runs a
// fused kernel, never the [Tq, Tk] score matrix of the math path: on the CPU dtrain's for 16-bit
// blocks (model/fused/flash_attention.h), else the device's own.
//
// q [B,H,Tq,hd], k/v [B,KV,Tk,hd] (KV divides H; query head h reads kv head h / (H/KV)). causal is
// top-left aligned: query i sees keys 0..i (the diagonal blocks it is used for have Tq == Tk).
// The scale is 1/sqrt(hd). lse is fp32 [B,H,Tq]; out is in q's dtype.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

struct BlockAttention {
  at::Tensor out, lse;
};
BlockAttention block_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal);

struct BlockGradients {
  at::Tensor dq, dk, dv;  // dk, dv shaped like k, v (KV heads)
};
// out and lse may be the GLOBAL ones, merged over every block a query sees, rather than this block's:
// the flash backward recomputes P = exp(S - lse) and D = rowsum(dout * out), which with the global pair
// are this block's share of the full softmax's gradient, so the blocks' gradients sum to the exact one.
// out in q's dtype, lse fp32 [B,H,Tq].
BlockGradients block_attention_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& out, const at::Tensor& lse, bool causal);

}  // namespace dtrain

// Flash attention on the CPU for 16-bit tensors whose every product is a 16-bit GEMM with fp32
// accumulation (ATen's CPU flash kernel multiplies its backward in fp32 SGEMM where the CPU has no
// AMX). Softmax, its log-sum-exp and the accumulators are fp32; the probabilities and the score
// gradients are rounded to the input type before the GEMMs that read them.
//
// q [B,H,Tq,hd], k/v [B,KV,Tk,hd] (KV divides H; query head h reads kv head h / (H/KV), k and v never
// copied per query head), head dims contiguous. causal is top-left aligned: query i sees keys 0..i.
// The scale is 1/sqrt(hd). Outputs are [B,H,T,hd] views of [B,T,H,hd] memory, as ATen's kernel gives.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

// Whether flash_attention_* serve these tensors: on the CPU, bf16 or fp16, an even head dim, and the
// 16-bit block GEMM native on this CPU (probed once). Callers keep ATen's kernel otherwise.
bool flash_attention_serves(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

struct FlashOutput {
  at::Tensor out, lse;  // out in q's dtype; lse fp32 [B,H,Tq]
};
// Which kernel computes the forward: ours, ATen's CPU flash kernel, or the faster of the two for the
// tensors. ATen's packs its blocks for AMX where the CPU has AMX for the dtype (ATen's
// cpublas::could_pack) and there runs the forward 1.4-2x as fast as ours (docs/benchmarks.md,
// "Attention kernel"); elsewhere ours is as fast or faster. Its backward is about twice as slow as
// ours at T 256 on both CPUs measured and within 5% of it at T 2048 with AMX, so the backward is ours,
// reading ATen's out and log-sum-exp where its forward ran. ATen's kernel takes grouped-query heads
// only with k and v copied per query head, so Fastest keeps ours there.
enum class FlashForward { Fastest, Ours, ATen };
FlashOutput flash_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                    FlashForward kernel = FlashForward::Fastest);

struct FlashGradients {
  at::Tensor dq, dk, dv;  // dk, dv shaped like k, v: summed over the query heads that share them
};
// out and lse may be global ones (merged over more keys than k and v hold, as ring attention passes):
// P = exp(S·scale - lse) and D = rowsum(dout·out) are then this block's share of the full softmax.
FlashGradients flash_attention_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& out, const at::Tensor& lse, bool causal);

// The forward as an autograd function (backward: flash_attention_backward). Requires flash_attention_serves.
at::Tensor flash_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal);

}  // namespace dtrain

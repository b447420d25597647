// What a micro-batch's forward pass leaves alive for its backward, per token, in bytes: Korthikanti
// et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", §4: sbh(34 + 5as/h)
// bytes per layer, its parts counted tensor by tensor), re-counted for what dtrain's autograd saves,
// and checked tensor by tensor with the counting allocator (train/tensor_memory.h) on GPT-2 and
// Llama shapes in fp32 and bf16 under each activation-checkpointing mode. Where dtrain departs from
// the paper: no dropout (no masks: the paper's 2sbh + as²b bytes), flash attention (no scores, no
// softmax: the paper's 5as²b; one fp32 log-sum-exp per head and token instead), the residual stream
// and norms' statistics in fp32, and the matmuls' operands in the compute type (4 or 2 bytes).
//
// Per token and block, with d = d_model, kv = n_kv_head · head_dim, f = the MLP's width, a = n_head,
// e = the compute type's bytes:
//   GPT-2:  2·4d (the block's input and the residual after attention, which the norms read)
//         + 4·e·d (the norms' outputs, q, and attention's output as the o projection's input)
//         + 2·e·kv (k, v) + 2·e·f (GELU's input and output) + 4a (log-sum-exp) + 4·4 (LayerNorm's
//         mean and rstd, twice);
//   Llama:  4d + 6·e·d (RoPE's and the norms' outputs and attention's, in the compute type)
//         + 2·e·kv + 4·e·f (SwiGLU's gate and up outputs, silu(gate), their product) + 4a + 2·4 (RMSNorm's rstd).
// At fp32 and d_ff = 4d, GPT-2's is 4·(16d + a + 4) bytes: the paper's 34 less its masks, at 4 bytes.
// Full recomputation keeps the block's input alone (4d) and the random-number state it ran under;
// selective recomputation (the attention core only) drops the log-sum-exp.
#pragma once
#include <cstdint>

#include "tools/estimate/memory_layout.h"

namespace dtrain {

// A block's saved activations per token when nothing is recomputed.
double block_bytes_per_token(const MemoryLayout& layout);
// Under selective recomputation: the attention core's inputs saved by its checkpoint instead of
// what the kernel keeps.
double selective_block_bytes_per_token(const MemoryLayout& layout);
// Under full recomputation: the block's input, fp32 (its 1/tp under sp, or partitioned over tp).
double checkpointed_block_bytes_per_token(const MemoryLayout& layout);
// The final norm's and the loss's: the norm's input (fp32) and output, the log-softmax over the
// vocabulary in the compute type, the norm's statistics and one value per token of the loss.
double head_bytes_per_token(const MemoryLayout& layout);
// The final norm's share of it, which outlives the loss's backward: its input, output and statistics.
double final_norm_bytes_per_token(const MemoryLayout& layout);
// The vocabulary rows one tensor-parallel rank holds: ceil(V/tp).
double vocab_slice(const MemoryLayout& layout);
// The gradient of the logits the loss hands the head, per token: e·V; under tp the vocab-parallel
// cross-entropy's fp32 gradient of the rank's slice (and its compute-type copy under bf16).
double logits_gradient_bytes_per_token(const MemoryLayout& layout);
// Tokens and targets of a micro-batch: two int64 per token.
inline constexpr double kBatchBytesPerToken = 16;

// What a checkpointed segment saves besides its inputs: the generator state it ran under, to
// recompute the same random numbers. The CPU generator's state (mt19937) is 5,056 bytes; a CUDA
// generator's is 16 bytes and lives on the host.
double generator_state_bytes(const MemoryLayout& layout);

// Tokens of one micro-batch on this rank: micro_batch × seq_len / cp.
double tokens_per_micro_batch(const MemoryLayout& layout);

}  // namespace dtrain

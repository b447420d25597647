#include "tools/estimate/activation_memory.h"

namespace dtrain {

namespace {

// The widths one rank computes at: under tensor parallelism (Megatron-LM's layout, apply_tp.h) the
// heads, key/value heads (whole below tp's count: one head each), MLP features and vocabulary are
// split over tp, and under sequence parallelism the residual stream and the norms run on 1/tp of
// the tokens: Korthikanti et al. 2022, §4.2.2 (tp: sbh(10 + 24/t + 5as/(ht)), the 10 the parts tp
// leaves whole) and §4.2.3 (tp + sp: sbh/t · 34, nothing whole).
struct Widths {
  double d, kv, f, a, e;
  double whole;  // the share of a micro-batch's tokens the residual stream and norms hold: 1, or 1/tp under sp
  int tp;
};

Widths widths(const MemoryLayout& l) {
  const TransformerConfig& m = l.model;
  const int t = l.tp;
  const double kv = m.kv_heads() % t == 0 ? double(m.kv_heads()) / t * m.head_dim() : double(m.head_dim());
  return {double(m.d_model), kv, double(m.ff_dim()) / t, double(m.n_head) / t, double(l.compute_bytes),
          l.sequence_parallel ? 1.0 / t : 1.0, t};
}

}  // namespace

double block_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  // Context parallelism's attention (ring or Ulysses, parallel/context) saves its own output for
  // its backward beside the o projection's input, a transposed copy: e·d more (the counting
  // allocator's live tensors at the peak).
  const double cp_output = l.cp > 1 ? w.e * w.d / w.tp : 0;
  // The residual stream's fp32 tensors, the norms' outputs and statistics: whole on each tp rank
  // (1/tp under sp); q, k, v, attention's output and the MLP's: split by heads and features.
  // Llama keeps both fp32 residuals (each an RMSNorm's input); of its queries, q as the kernel reads
  // it and the kernel's output: ATen's fp32 kernel writes [B, H, T, hd], so the o projection's input
  // is a third copy (3 · 4 bytes per d/tp), dtrain's 16-bit kernel writes the o projection's layout
  // (2 · 2): 4e - 4 either way.
  if (l.model.is_llama())
    return cp_output + w.whole * (2 * 4 * w.d + 2 * w.e * w.d + 2 * 4) + (4 * w.e - 4) * w.d / w.tp + 2 * w.e * w.kv + 4 * w.e * w.f +
           4 * w.a;
  return cp_output + w.whole * (2 * 4 * w.d + 2 * w.e * w.d + 4 * 4) + 2 * w.e * w.d / w.tp + 2 * w.e * w.kv + 2 * w.e * w.f + 4 * w.a;
}

double selective_block_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  // The log-sum-exp goes with the kernel's saved tensors (and context parallelism's output copy);
  // the checkpoint saves the core's inputs.
  double bytes = block_bytes_per_token(l) - 4 * w.a - (l.cp > 1 ? w.e * w.d / w.tp : 0);
  if (!l.model.is_llama()) return bytes;  // q, k and v are the projections' outputs, which backward keeps anyway
  // Llama's q and k enter the core as RoPE's fp32 outputs, which the checkpoint saves in place of the
  // kernel's compute-type copies. In fp32 ATen's kernel also keeps its own output beside the o
  // projection's input (a transposed copy of it); recomputed, only the copy stays.
  return w.e < 4 ? bytes + (4 - w.e) * (w.d / w.tp + w.kv) : bytes - 4 * w.d / w.tp;
}

double checkpointed_block_bytes_per_token(const MemoryLayout& l) {
  // partition_activations keeps 1/tp of an input every tp rank holds alike (model/activation_store.h);
  // under sp the input already is the rank's 1/tp.
  const bool partitioned = l.activation_checkpointing.store.partition && l.tp > 1 && !l.sequence_parallel;
  return 4.0 * l.model.d_model * widths(l).whole / (partitioned ? l.tp : 1);
}

double final_norm_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  // LayerNorm keeps mean and rstd, RMSNorm rstd.
  const double statistics = l.model.is_llama() ? 1 : 2;
  return w.whole * (4 * w.d + w.e * w.d + 4 * statistics);
}

double head_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  const double norm = final_norm_bytes_per_token(l);
  // The loss keeps one fp32 value per token; the vocab-parallel cross-entropy instead its fp32
  // softmax over the rank's slice, and per token the target's column (int64), whether this rank
  // holds it (bool) and its weight in the mean (fp32): 13 bytes.
  if (w.tp == 1) return norm + w.e * double(l.model.vocab_size) + 4;
  return norm + 4 * vocab_slice(l) + 13;
}

double vocab_slice(const MemoryLayout& l) { return double((int64_t(l.model.vocab_size) + l.tp - 1) / l.tp); }

double logits_gradient_bytes_per_token(const MemoryLayout& l) {
  // The vocab-parallel cross-entropy's gradient is fp32, cast to the compute type when that is 16 bits.
  if (l.tp == 1) return double(l.compute_bytes) * l.model.vocab_size;
  return (4 + (l.compute_bytes < 4 ? l.compute_bytes : 0)) * vocab_slice(l);
}

double generator_state_bytes(const MemoryLayout& l) { return l.device_is_cpu ? 5056 : 0; }

double tokens_per_micro_batch(const MemoryLayout& l) { return double(l.micro_batch) * l.model.seq_len / l.cp; }

}  // namespace dtrain

#include "tools/estimate/activation_memory.h"

namespace dtrain {

namespace {

struct Widths {
  double d, kv, f, a, e;
};

Widths widths(const MemoryLayout& l) {
  const TransformerConfig& m = l.model;
  return {double(m.d_model), double(m.kv_heads()) * m.head_dim(), double(m.ff_dim()), double(m.n_head), double(l.compute_bytes)};
}

}  // namespace

double block_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  if (l.model.is_llama()) return 4 * w.d + 6 * w.e * w.d + 2 * w.e * w.kv + 4 * w.e * w.f + 4 * w.a + 2 * 4;
  return 2 * 4 * w.d + 4 * w.e * w.d + 2 * w.e * w.kv + 2 * w.e * w.f + 4 * w.a + 4 * 4;
}

double selective_block_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  // The log-sum-exp goes with the kernel's saved tensors; the checkpoint saves the core's inputs.
  double bytes = block_bytes_per_token(l) - 4 * w.a;
  if (!l.model.is_llama()) return bytes;  // q, k and v are the projections' outputs, which backward keeps anyway
  // Llama's q and k enter the core as RoPE's fp32 outputs, which the checkpoint saves in place of the
  // kernel's compute-type copies. In fp32 ATen's kernel also keeps its own output beside the o
  // projection's input (a transposed copy of it); recomputed, only the copy stays.
  return w.e < 4 ? bytes + (4 - w.e) * (w.d + w.kv) : bytes - 4 * w.d;
}

double checkpointed_block_bytes_per_token(const MemoryLayout& l) { return 4.0 * l.model.d_model; }

double head_bytes_per_token(const MemoryLayout& l) {
  const Widths w = widths(l);
  // LayerNorm keeps mean and rstd, RMSNorm rstd; the loss one fp32 value per token.
  const double statistics = l.model.is_llama() ? 2 : 3;
  return 4 * w.d + w.e * w.d + w.e * double(l.model.vocab_size) + 4 * statistics;
}

double generator_state_bytes(const MemoryLayout& l) { return l.device_is_cpu ? 5056 : 0; }

double tokens_per_micro_batch(const MemoryLayout& l) { return double(l.micro_batch) * l.model.seq_len / l.cp; }

}  // namespace dtrain

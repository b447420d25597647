// The model states one rank keeps for a whole run: parameters, gradients and optimizer states, as
// the ZeRO paper counts them (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", §3.1: 2Ψ of fp16 parameters, 2Ψ of fp16 gradients and KΨ of optimizer
// states, K = 12 for mixed-precision Adam's fp32 copy, momentum and variance; stage 1 divides the KΨ
// by the data-parallel degree N_d, stage 2 the gradients too, stage 3 the parameters too), adjusted
// to what dtrain keeps: the fp32 parameters are themselves the master weights (4Ψ, no separate copy),
// gradients are fp32 (4Ψ), the optimizer holds only its own state (AdamW's two fp32 moments: K = 8),
// and mixed precision adds 16-bit working copies of the matmul weights alone (2Ψ_mm). Every buffer is
// flat (optim/flat_parameters.h): its bytes are its elements' bytes, and ZeRO's shards are padded to
// equal pieces per bucket or unit (parallel/zero/bucket_shards.h), at most dp - 1 elements each.
#pragma once
#include <cstdint>
#include <vector>

#include "tools/estimate/memory_estimate.h"
#include "tools/estimate/pipeline_stage.h"

namespace dtrain {

// The model's parameters by the parts ZeRO-3 gathers and the buffers mixed precision copies.
struct ParameterCounts {
  int blocks = 0;            // the blocks held: n_layer, or a pipeline stage's
  int64_t block = 0;         // one transformer block
  int64_t block_matmul = 0;  // its matmul weights (q, k, v, o, the MLP's), which mixed precision copies to 16 bits
  int64_t embeddings = 0;    // wte (and GPT-2's wpe)
  int64_t table = 0;         // wte alone: vocab × d
  int64_t head = 0;          // the final norm, and the output head when it is not tied to wte
  int64_t vision = 0;        // a vision-language model's vision encoder and connector
  int64_t vision_block = 0;  // one encoder block: a ZeRO-3 unit of the vision side
  int64_t total = 0;
  // Matmul weights with a 16-bit working copy under mixed precision: every block's, and the head's
  // (wte when tied).
  int64_t matmul = 0;
  // Of `total`: the parameters no gradient reaches (train.freeze, parallel.modules freeze), which
  // stay out of the flat buffer, whole on every rank; and the trainable ones parallel.modules keeps
  // whole (zero_stage 0), whose pieces, gradients and optimizer state every rank holds entire.
  int64_t frozen = 0;
  int64_t kept_whole = 0;
  bool table_frozen = false;  // wte, and so a tied head, gets no gradient
  bool table_kept_whole = false;
  bool vision_frozen = false;  // every vision.* parameter frozen: the encoder runs forward only
  // The frozen encoder's matmul weights (the patch embedding's, each block's q, k, v, o, up, down),
  // whose 16-bit working copies mixed precision keeps beside every ZeRO-3 unit.
  int64_t vision_frozen_matmul = 0;
  // Of the LLM's blocks, how many from the first are frozen whole behind frozen embeddings (the
  // token table and GPT-2's position table), under pp within the model's first chunk: no gradient
  // reaches them, so they run forward only and save nothing for backward. 0 when the embeddings train.
  int forward_only_blocks = 0;

  int64_t trainable() const { return total - frozen; }
  // The elements of one rank's ZeRO shard over `ranks`: the sharded ones' 1/ranks and those kept whole.
  int64_t sharded_numel(int ranks) const;
};

// One tensor-parallel rank's share of them (parallel/tensor/apply_tp.h, Megatron-LM's layout): q, k,
// v, gate and up keep 1/tp of their rows and biases, o and down 1/tp of their columns (their biases
// whole), the table and an untied head ceil(V/tp) rows (vocab_range.h: the first ranks hold the
// most); norms and GPT-2's position table stay whole. Key/value weights stay whole when tp exceeds
// the key/value heads. tp 1 counts the whole model.
ParameterCounts parameter_counts(const TransformerConfig& model, int tp = 1);

// What pipeline stage `stage` holds of them: its blocks, the embeddings on the first stage, the final
// norm and the head on the last, where a tied table has its second copy (pipeline_stages.h); the
// 16-bit working copy of the table goes with the head, whose GEMM reads it.
ParameterCounts stage_parameter_counts(const ParameterCounts& whole, const TransformerConfig& model, const PipelineStage& stage);

// ParameterCounts::forward_only_blocks of `layout`'s whole model.
int forward_only_blocks(const MemoryLayout& layout);

// `counts` with the parameters `layout` freezes and keeps whole counted (its frozen and kept_whole
// names), of those pipeline stage `stage` holds (every one without pp).
ParameterCounts with_module_plan(ParameterCounts counts, const MemoryLayout& layout, const PipelineStage& stage = PipelineStage{});

// The model states' terms for one rank of `layout`, each with its formula.
std::vector<MemoryTerm> model_state_terms(const MemoryLayout& layout, const ParameterCounts& counts);

// The elements of one rank's ZeRO shard of `numel` parameters over `ranks`: ceil(numel / ranks).
int64_t shard_numel(int64_t numel, int ranks);

}  // namespace dtrain

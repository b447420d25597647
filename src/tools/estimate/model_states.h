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

namespace dtrain {

// The model's parameters by the parts ZeRO-3 gathers and the buffers mixed precision copies.
struct ParameterCounts {
  int64_t block = 0;         // one transformer block
  int64_t block_matmul = 0;  // its matmul weights (q, k, v, o, the MLP's), which mixed precision copies to 16 bits
  int64_t embeddings = 0;    // wte (and GPT-2's wpe)
  int64_t table = 0;         // wte alone: vocab × d
  int64_t head = 0;          // the final norm, and the output head when it is not tied to wte
  int64_t total = 0;
  // Matmul weights with a 16-bit working copy under mixed precision: every block's, and the head's
  // (wte when tied).
  int64_t matmul = 0;
};

ParameterCounts parameter_counts(const TransformerConfig& model);

// The model states' terms for one rank of `layout`, each with its formula.
std::vector<MemoryTerm> model_state_terms(const MemoryLayout& layout, const ParameterCounts& counts);

// The elements of one rank's ZeRO shard of `numel` parameters over `ranks`: ceil(numel / ranks).
int64_t shard_numel(int64_t numel, int ranks);

}  // namespace dtrain

// What a vision-language model's vision side (model/vision_encoder.h, model/connector.h) keeps for its
// backward, per micro-batch. The data gives each sample at most one image, fitted to at most
// max_image_patches patches (data/patch_grid.h: max_grid a side, data.max_image_tokens and the row's
// seq_len bound its tokens); images differ in size, so the estimate takes the worst case the config
// allows, every sample's image at the largest grid. The encoder runs all of a micro-batch's patches
// packed as one sequence, N = micro_batch × max_image_patches, through GPT-2-kind blocks
// (activation_memory.h's count at the encoder's widths) whose attention is bidirectional within each
// image; the connector maps the N/merge² image tokens to the LLM's width. The vision side is the same
// under tp (every tp rank holds and runs it whole) and under activation checkpointing (which
// recomputes the LLM's blocks alone); under mixed precision its matmuls keep compute-type inputs.
#pragma once
#include <vector>

#include "tools/estimate/memory_estimate.h"
#include "tools/estimate/model_states.h"

namespace dtrain {

// Patches of one micro-batch at the worst case: micro_batch × max_image_patches.
double vision_patches_per_micro_batch(const MemoryLayout& layout);

// The vision side's saved tensors from its forward until its backward, as terms: with the encoder
// trained, every block's and the stem's, the final norm's and the merge's, and the connector's; with
// the encoder frozen (counts.vision_frozen) the encoder records no graph and saves nothing, so only
// the connector's remain. The micro-batch's patches are among the batch's tensors (vision_batch_term).
std::vector<MemoryTerm> vision_saved_terms(const MemoryLayout& layout, const ParameterCounts& counts);

// The micro-batch's images: their patches in fp32 (channels·patch² values each) and grids.
MemoryTerm vision_batch_term(const MemoryLayout& layout);

// The encoder's last block's backward, the vision side's busiest moment when its activations outweigh
// the LLM's: every block's saved tensors still alive and the block's gradient working set.
std::vector<MemoryTerm> vision_block_backward_terms(const MemoryLayout& layout, const ParameterCounts& counts);

// One encoder block gathered by ZeRO-3: its matmul weights (q, k, v, o, up, down) in the compute
// type under mixed precision, its biases and norms in fp32.
double vision_block_unit_bytes(const MemoryLayout& layout);

}  // namespace dtrain

#include "tools/estimate/vision_memory.h"

#include "common/number_text.h"
#include "tools/estimate/activation_memory.h"

namespace dtrain {

namespace {

MemoryTerm term(std::string name, double bytes, std::string formula) {
  return {std::move(name), MemoryKind::Activations, MemoryPlace::Device, bytes, std::move(formula)};
}

// The layout of a text model shaped like one encoder block (vision_encoder.cpp's block_config), whose
// per-token count is the encoder's per patch.
MemoryLayout encoder_block_layout(const MemoryLayout& l) {
  MemoryLayout b;
  const VisionConfig& v = l.model.vision;
  b.model.arch = "gpt2";
  b.model.n_layer = v.n_layer;
  b.model.n_head = v.n_head;
  b.model.d_model = v.d_model;
  b.model.d_ff = v.ff_dim();
  b.compute_bytes = l.compute_bytes;
  return b;
}

std::string patches_text(const MemoryLayout& l) {
  return "N = " + plain(vision_patches_per_micro_batch(l)) + " patches (" + std::to_string(l.micro_batch) + " × " +
         std::to_string(l.max_image_patches) + ")";
}

}  // namespace

double vision_patches_per_micro_batch(const MemoryLayout& l) { return double(l.micro_batch) * double(l.max_image_patches); }

std::vector<MemoryTerm> vision_saved_terms(const MemoryLayout& l, const ParameterCounts& c) {
  const VisionConfig& v = l.model.vision;
  const double N = vision_patches_per_micro_batch(l), tokens = N / (v.merge * v.merge), d = v.d_model, D = l.model.d_model;
  const double e = l.compute_bytes;
  std::vector<MemoryTerm> out;
  if (!c.vision_frozen) {
    // The blocks are never checkpointed (model/vision_encoder.cpp runs them plainly) and stay whole
    // under tp (apply_tp.cpp replicates the vision side): one encoder block's count at tp 1.
    const double block = block_bytes_per_token(encoder_block_layout(l));
    out.push_back(term("activations: vision encoder blocks' saved tensors", v.n_layer * block * N,
                       std::to_string(v.n_layer) + " blocks × " + plain(block) + " B/patch × " + patches_text(l)));
    // The stem's row and column indices (int64, the tables' lookups keep them), the final norm's input
    // (fp32) with its mean and rstd, and the merge's index (int64). Under mixed precision the patch
    // embedding keeps its input cast to the compute type too (in fp32 it keeps the batch's patches).
    const double stem_cast = e < 4 ? e * double(v.patch_values()) : 0;
    out.push_back(term("activations: vision stem's positions, final norm and merge", (16 + stem_cast + 4 * d + 8 + 8) * N,
                       e < 4 ? "(16 + e·channels·patch² + 4d_v + 16) B/patch × N" : "(16 + 4d_v + 16) B/patch × N"));
  }
  // The connector: fc1's input (the merged features cast to the compute type, e·d_v per patch), GELU's
  // input and fc2's input (e·D per image token each); and the placeholders' mask (one byte per LLM
  // token) that places them.
  const double text_tokens = tokens_per_micro_batch(l);
  out.push_back(term("activations: connector's inputs and the image tokens' placement", e * d * N + 2 * e * D * tokens + text_tokens,
                     "e·d_v·N + 2e·D·N/merge² + T"));
  return out;
}

MemoryTerm vision_batch_term(const MemoryLayout& l) {
  const double N = vision_patches_per_micro_batch(l), values = double(l.model.vision.patch_values());
  return term("micro-batch images: patches and grids", 4 * values * N + 16.0 * l.micro_batch,
              "4·channels·patch²·N + 16 B/image, " + patches_text(l));
}

std::vector<MemoryTerm> vision_block_backward_terms(const MemoryLayout& l, const ParameterCounts& c) {
  if (c.vision_frozen) return {};
  const VisionConfig& v = l.model.vision;
  const double N = vision_patches_per_micro_batch(l), d = v.d_model, f = v.ff_dim(), e = l.compute_bytes;
  std::vector<MemoryTerm> out = vision_saved_terms(l, c);
  // The connector's and the final norm's saved tensors were released by their backward.
  out.pop_back();
  if (e < 4)
    out.back() = term("activations: vision stem's positions and cast patches", (16 + e * double(v.patch_values())) * N,
                      "(16 + e·channels·patch²) B/patch × N");
  else
    out.back() = term("activations: vision stem's positions", 16 * N, "16 B/patch × N");
  // As the LLM's blocks' (step_peak.cpp's block working set, GPT-2): the gradient flowing in (fp32),
  // the MLP's input gradient and the down projection's weight gradient; under mixed precision two
  // compute-type N·f gradients and a compute-type weight gradient.
  if (e < 4)
    out.push_back(term("backward: a vision block's gradient working set", 4 * N * d + 2 * e * N * f + e * f * d, "4·N·d_v + 2e·N·f_v + e·f_v·d_v"));
  else
    out.push_back(term("backward: a vision block's gradient working set", 4 * N * d + 4 * N * f + 4 * f * d, "4·N·d_v + 4·N·f_v + 4·f_v·d_v"));
  return out;
}

double vision_block_unit_bytes(const MemoryLayout& l) {
  const VisionConfig& v = l.model.vision;
  const double all = double(v.block_parameters()), d = v.d_model, matmul = 4 * d * d + 2 * d * v.ff_dim();
  return l.compute_bytes < 4 ? l.compute_bytes * matmul + 4 * (all - matmul) : 4 * all;
}

}  // namespace dtrain

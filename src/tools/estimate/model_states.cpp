#include "tools/estimate/model_states.h"

#include <optional>
#include <set>
#include <string>

#include "model/parameter_shapes.h"
#include "parallel/tensor/tp_cut.h"
#include "tools/estimate/offload_states.h"

namespace dtrain {

namespace {

std::string count_text(int64_t n) { return std::to_string(n); }

}  // namespace

ParameterCounts parameter_counts(const TransformerConfig& m, int tp) {
  const int64_t d = m.d_model, f = m.ff_dim() / tp, q = int64_t(m.n_head) * m.head_dim() / tp;
  const bool kv_whole = m.kv_heads() % tp != 0;
  const int64_t kv = int64_t(m.kv_heads()) * m.head_dim() / (kv_whole ? 1 : tp);
  const int64_t V = (int64_t(m.vocab_size) + tp - 1) / tp;
  ParameterCounts c;
  c.blocks = m.n_layer;
  // q, k, v and o; GPT-2's MLP is up and down, Llama's SwiGLU gate, up and down.
  c.block_matmul = d * q + 2 * d * kv + q * d + (m.is_llama() ? 3 : 2) * d * f;
  // GPT-2: a bias per linear layer (o's and down's whole under tp) and LayerNorm's weight and bias
  // twice; Llama: RMSNorm's weight twice.
  c.block = c.block_matmul + (m.is_llama() ? 2 * d : q + 2 * kv + d + f + d + 4 * d);
  c.table = V * d;
  c.embeddings = c.table + (m.is_llama() ? 0 : int64_t(m.seq_len) * d);
  c.head = (m.is_llama() ? d : 2 * d) + (m.tie_embeddings ? 0 : V * d);
  c.total = m.n_layer * c.block + c.embeddings + c.head;
  c.matmul = m.n_layer * c.block_matmul + V * d;  // the tied head reads wte's working copy; an untied one its own
  if (m.is_vlm()) {
    // The vision side stays whole under the LLM's parallelisms (vision_config.h).
    const VisionConfig& v = m.vision;
    const int64_t vd = v.d_model, vf = v.ff_dim();
    c.vision = v.parameter_count(m.d_model);
    c.vision_block = v.block_parameters();
    c.total += c.vision;
    // The patch embedding's, each block's q, k, v, o, up and down, the connector's two layers.
    c.matmul += vd * v.patch_values() + v.n_layer * (4 * vd * vd + 2 * vd * vf) + int64_t(m.d_model) * (v.merged_dim() + m.d_model);
  }
  return c;
}

ParameterCounts stage_parameter_counts(const ParameterCounts& whole, const TransformerConfig& m, const PipelineStage& stage) {
  if (!stage.pipelined()) return whole;
  ParameterCounts c = whole;
  c.blocks = stage.blocks;
  if (!stage.first) c.embeddings = 0;
  if (!stage.first && !(stage.last && m.tie_embeddings)) c.table = 0;
  c.head = stage.last ? whole.head + (m.tie_embeddings ? whole.table : 0) : 0;
  c.total = c.blocks * c.block + c.embeddings + c.head;
  c.matmul = c.blocks * c.block_matmul + (stage.last ? whole.table : 0);
  return c;
}

int64_t shard_numel(int64_t numel, int ranks) { return (numel + ranks - 1) / ranks; }

int64_t ParameterCounts::sharded_numel(int ranks) const { return shard_numel(trainable() - kept_whole, ranks) + kept_whole; }

namespace {

// Whether pipeline stage `stage` holds the LLM's parameter `name`: a block's on the stage of its
// chunk, the embeddings on the first stage, the final norm and an untied head on the last, and a
// tied table on both (pipeline_stages.h).
bool stage_holds(const PipelineStage& stage, const TransformerConfig& m, const std::string& name) {
  if (!stage.pipelined()) return true;
  if (const std::optional<int> block = block_of(m, name)) {
    for (int i = 0; i < stage.blocks; ++i)
      if (stage.model_block(i) == *block) return true;
    return false;
  }
  if (name == "wte.weight") return stage.first || (stage.last && m.tie_embeddings);
  if (name == "wpe.weight") return stage.first;
  return stage.last;
}

}  // namespace

int forward_only_blocks(const MemoryLayout& l) {
  const std::set<std::string> frozen(l.frozen.begin(), l.frozen.end());
  const std::string p = l.model.llm_prefix();
  // A vision-language model's image tokens enter the sequence through the connector, so its blocks'
  // inputs need gradients whatever is frozen before them.
  if (l.model.is_vlm() || !frozen.count(p + "wte.weight") || (!l.model.is_llama() && !frozen.count(p + "wpe.weight"))) return 0;
  std::vector<bool> block_frozen(size_t(l.model.n_layer), true);
  for (const ParameterShape& s : parameter_shapes(l.model))
    if (const std::optional<int> block = block_of(l.model, s.name); block && !frozen.count(s.name)) block_frozen[size_t(*block)] = false;
  // Under pp only the model's first chunk runs its frozen blocks so: a later chunk's input comes from
  // another chunk and is made to require its gradient (pipeline_runner.cpp), so frozen blocks there
  // record their graphs.
  const int limit = chunk_blocks(l).front();
  int k = 0;
  while (k < limit && block_frozen[size_t(k)]) ++k;
  return k;
}

ParameterCounts with_module_plan(ParameterCounts c, const MemoryLayout& l, const PipelineStage& stage) {
  const std::set<std::string> frozen(l.frozen.begin(), l.frozen.end()), whole(l.kept_whole.begin(), l.kept_whole.end());
  const std::string table = l.model.llm_prefix() + "wte.weight";
  for (const ParameterShape& s : parameter_shapes(l.model)) {
    if (!stage_holds(stage, l.model, s.name)) continue;
    // This tp rank's piece: a cut dim split evenly (apply_tp's divisibility checks), or the rank's
    // rows of the vocabulary for the table and an untied head, the most any rank holds.
    const std::optional<int> cut = tp_cut(s.name, l.model.kv_heads() % l.tp != 0);
    int64_t numel = 1;
    for (size_t dim = 0; dim < s.shape.size(); ++dim)
      numel *= cut && *cut == int(dim) ? (s.shape[dim] + l.tp - 1) / l.tp : s.shape[dim];
    if (frozen.count(s.name)) c.frozen += numel;
    else if (whole.count(s.name)) c.kept_whole += numel;
  }
  c.table_frozen = frozen.count(table) > 0;
  c.table_kept_whole = whole.count(table) > 0;
  c.forward_only_blocks = forward_only_blocks(l);
  if (l.model.is_vlm()) {
    c.vision_frozen = true;
    for (const ParameterShape& s : parameter_shapes(l.model))
      if (s.name.rfind("vision.", 0) == 0 && !frozen.count(s.name)) c.vision_frozen = false;
    const VisionConfig& v = l.model.vision;
    const int64_t vd = v.d_model;
    if (c.vision_frozen) c.vision_frozen_matmul = vd * v.patch_values() + v.n_layer * (4 * vd * vd + 2 * vd * v.ff_dim());
  }
  return c;
}

std::vector<MemoryTerm> model_state_terms(const MemoryLayout& l, const ParameterCounts& c) {
  const int64_t psi = c.trainable(), shard = c.sharded_numel(l.dp_shard);
  const std::string n = count_text(psi), over = " / " + std::to_string(l.dp_shard);
  // The rank's shard, K bytes an element: parallel.modules' stage-0 parameters (W of them) are
  // every rank's whole piece of their buckets.
  const auto shard_formula = [&](const std::string& k) {
    if (c.kept_whole == 0) return k + "Ψ/dp = " + k + " × " + n + over;
    const std::string w = count_text(c.kept_whole);
    return k + "(Ψ - W)/dp + " + k + "W = " + k + " × (" + n + " - " + w + ")" + over + " + " + k + " × " + w;
  };
  std::vector<MemoryTerm> terms;
  // ZeRO paper's 2Ψ of parameters: here the fp32 parameters, which are the master weights too.
  if (l.zero_stage == 3)
    terms.push_back({"parameters, fp32 shard (ZeRO-3)", MemoryKind::Parameters, parameter_shard_place(l), 4.0 * double(shard), shard_formula("4")});
  else
    terms.push_back({"parameters, fp32 (flat buffer)", MemoryKind::Parameters, MemoryPlace::Device, 4.0 * double(psi), "4Ψ = 4 × " + n});
  // Frozen parameters stay the model's own tensors, outside the flat buffer and every shard.
  if (c.frozen > 0)
    terms.push_back({"parameters, fp32, frozen (whole on every rank)", MemoryKind::Parameters, MemoryPlace::Device, 4.0 * double(c.frozen),
                     "4Ψ_frozen = 4 × " + count_text(c.frozen)});
  // Mixed precision: a 16-bit working copy of each matmul weight, refreshed once per step. ZeRO-3
  // keeps none: each unit's copy lives only while the unit is gathered (step_peak.h).
  if (l.compute_bytes < 4 && l.zero_stage < 3)
    terms.push_back({"parameters, 16-bit working copies of the matmul weights", MemoryKind::Parameters, MemoryPlace::Device,
                     double(l.compute_bytes) * double(c.matmul), "2Ψ_mm = 2 × " + count_text(c.matmul)});
  // A frozen encoder is in no unit: its working copies stay, as every weight's does below stage 3.
  if (l.compute_bytes < 4 && l.zero_stage == 3 && c.vision_frozen_matmul > 0)
    terms.push_back({"parameters, 16-bit working copies of the frozen vision encoder's matmul weights", MemoryKind::Parameters,
                     MemoryPlace::Device, double(l.compute_bytes) * double(c.vision_frozen_matmul),
                     "2Ψ_mm,frozen = 2 × " + count_text(c.vision_frozen_matmul)});
  // ZeRO paper's 2Ψ of gradients: fp32 here, whole under DDP and stage 1 (one flat buffer autograd
  // accumulates into), the rank's shard from stage 2 (what the reduce-scatters leave).
  if (l.zero_stage >= 2)
    terms.push_back({"gradients, fp32 shard (ZeRO-" + std::to_string(l.zero_stage) + ")", MemoryKind::Gradients, MemoryPlace::Device,
                     4.0 * double(shard), shard_formula("4")});
  else
    terms.push_back({"gradients, fp32 (flat buffer)", MemoryKind::Gradients, MemoryPlace::Device, 4.0 * double(psi), "4Ψ = 4 × " + n});
  // ZeRO paper's KΨ, divided over dp from stage 1. K: the optimizer's own flat state (AdamW 8).
  // Offloaded, it is on the host or NVMe instead (offload_states.h).
  if (l.optimizer_bytes > 0) {
    const bool sharded_state = l.zero_stage >= 1;
    const std::string k = std::to_string(int(l.optimizer_bytes));
    terms.push_back({"optimizer states (" + l.optimizer_name + (sharded_state ? ", ZeRO shard)" : ")"), MemoryKind::OptimizerStates,
                     optimizer_state_place(l), l.optimizer_bytes * double(sharded_state ? shard : psi),
                     sharded_state ? shard_formula(k) : "KΨ = " + k + " × " + n});
  }
  for (MemoryTerm& t : offload_buffer_terms(l, c)) terms.push_back(std::move(t));
  return terms;
}

}  // namespace dtrain

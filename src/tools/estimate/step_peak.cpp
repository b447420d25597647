#include "tools/estimate/step_peak.h"

#include <algorithm>
#include <cmath>

#include "common/number_text.h"
#include "parallel/pipeline/schedule_kind.h"
#include "tools/estimate/activation_memory.h"
#include "tools/estimate/offload_states.h"
#include "tools/estimate/vision_memory.h"

namespace dtrain {

namespace {

std::string blocks_text(int n) { return std::to_string(n) + (n == 1 ? " block" : " blocks"); }

MemoryTerm term(std::string name, MemoryKind kind, double bytes, std::string formula, MemoryPlace place = MemoryPlace::Device) {
  return {std::move(name), kind, place, bytes, std::move(formula)};
}

// The shapes every moment reads, once.
struct Step {
  const MemoryLayout& l;
  const ParameterCounts& c;
  const PipelineStage& stage;
  double T, d, f, V, e;  // tokens of a micro-batch, widths (f: the rank's MLP features under tp), compute bytes
  int L;
  int K;  // the stage's blocks from its first that run forward only: no backward reaches them

  Step(const MemoryLayout& layout, const ParameterCounts& counts, const PipelineStage& pipeline_stage)
      : l(layout), c(counts), stage(pipeline_stage), T(tokens_per_micro_batch(layout)), d(layout.model.d_model), f(double(layout.model.ff_dim()) / layout.tp),
        V(layout.model.vocab_size), e(layout.compute_bytes), L(counts.blocks), K(0) {
    // The model's forward-only blocks are its first, so the stage's are its first too.
    while (K < L && stage.model_block(K) < counts.forward_only_blocks) ++K;
  }
  // The blocks of local chunk `k` that get gradients (the stage's [K, L)).
  int trained_blocks_of_chunk(size_t k) const {
    const int first = first_block_of_chunk(k), end = first + stage.chunks[k].blocks;
    return end - std::min(end, std::max(first, K));
  }

  bool tied() const { return l.model.tie_embeddings; }
  // A tied table that gets gradients: not frozen (train.freeze, parallel.modules).
  bool tied_trained() const { return tied() && !c.table_frozen; }
  // Checkpointing counts blocks over the whole model: a stage's block i is its chunks' i-th.
  bool whole_block(int i) const { return l.activation_checkpointing.whole_block(stage.model_block(i)); }
  bool selective() const { return l.activation_checkpointing.attention_core(); }
  // The share of a micro-batch's tokens the residual stream holds on a rank: 1/tp under sequence parallelism.
  double sp_share() const { return l.sequence_parallel ? 1.0 / l.tp : 1.0; }
  // A block's input per token on this rank, in fp32: what a checkpointed block keeps whole.
  double block_input_per_token() const { return 4.0 * d * sp_share(); }
  bool zero_bubble() const { return stage.pipelined() && l.schedule == ScheduleKind::ZeroBubble; }

  // zero_bubble (fp32 or bf16): what a micro-batch's I leaves to its W per token. Each linear
  // layer's deferred weight-gradient GEMM (model/weight_grad_store.h) holds the layer's input and
  // output gradient, in the compute type (e bytes): a block's inputs are the attention's and the
  // MLP's normed inputs, the o projection's input and the down projection's (3d + f), its output
  // gradients q's, k's, v's, o's, the MLP's input matrices' (GPT-2 one, Llama's SwiGLU two) and the
  // down projection's (3d + 2·kv + f or 2f); the head's, the final norm's output and the logits'
  // gradient (d + V). The stored inputs are detached: no autograd history keeps the graph behind them
  // (a recomputed block's, or a received input's leaf and its gradient). Measured with the counting
  // allocator's live tensors at the tiny model's peaks, GPT-2 and Llama, exactly in fp32, with blocks
  // recomputed whole within -0.8% to +0.6%; in bf16 the tiny and demo models within +0.8% to +3.2%.
  // Under tp only the row-parallel layers defer (the column-parallel ones compute their weight
  // gradients behind their input gradient's reduction: parallel/tensor/column_parallel_linear.cpp),
  // and the vocab-parallel head nothing: the o and down projections' inputs (d/tp + f) and output
  // gradients (2d, whole also under sp, gathered for the GEMM).
  double block_store_per_token() const {
    if (l.tp > 1) return e * (2 * d + d / l.tp + f);
    const double kv = double(l.model.kv_heads()) * l.model.head_dim(), mlp_in = l.model.is_llama() ? 2 : 1;
    return e * ((3 * d + f) + (3 * d + 2 * kv + mlp_in * f));
  }
  // A frozen tied head has no weight gradient to defer: its I leaves nothing to a W.
  double head_store_per_token() const { return l.tp > 1 || (tied() && c.table_frozen) ? 0 : e * (d + V); }
  double stored_bytes_per_token(size_t c) const {
    return trained_blocks_of_chunk(c) * block_store_per_token() + (stage.chunks[c].last ? head_store_per_token() : 0);
  }
  double stored_bytes_per_token(const PipelineMoment& at) const {
    double bytes = 0;
    for (size_t c = 0; c < stage.chunks.size(); ++c) bytes += at.stored[c] * stored_bytes_per_token(c);
    return bytes;
  }

  // ZeRO-3 cuts a tied table larger than every other unit into units of rows, which the lookup and
  // the head gather and reduce one block of rows at a time (parallel/zero/sharded_table.h); not one
  // that is frozen (in no unit), kept whole by parallel.modules, or gathered in 16 bits
  // (parallel.fsdp.param_dtype: Parallelizer::table_split).
  double largest_other_unit() const { return std::max(double(l.compute_bytes < 4 ? c.block_matmul : c.block), double(c.head)); }
  bool table_in_rows() const {
    return l.zero_stage == 3 && tied_trained() && !c.table_kept_whole && !l.gather_16bit && l.tp == 1 && l.pp == 1 &&
           double(c.table) > largest_other_unit();
  }
  // Equal blocks of whole rows, as few as keep each within the largest other unit.
  double row_block_bytes() const {
    const double blocks = std::ceil(double(c.table) / largest_other_unit());
    return 4 * std::ceil(V / blocks) * d;
  }

  // A gathered ZeRO-3 unit's bytes: matmul-only weights gathered in 16 bits under mixed precision.
  double block_unit_bytes() const { return e < 4 ? e * c.block_matmul + 4.0 * (c.block - c.block_matmul) : 4.0 * c.block; }
  // The tied table is gathered in fp32 (the lookup reads it) and rounded into its working copy; a
  // frozen one is in no unit.
  double embeddings_unit_bytes() const {
    if (c.forward_only_blocks > 0) return 0;  // the embeddings all frozen
    return 4.0 * double(c.embeddings - (c.table_frozen ? c.table : 0)) + (e < 4 && tied_trained() ? e * c.table : 0);
  }
  double head_unit_bytes() const { return 4.0 * c.head; }

  std::string tokens() const { return "T = " + plain(T) + " tokens"; }

  // The final norm's and the loss's saved tensors per token. A frozen tied head needs no gradient of
  // its weight, so autograd keeps no copy of its input, the final norm's output (e·d; measured with
  // the counting allocator); under tp the vocab-parallel head is a column-parallel function, which
  // saves its input whether the table trains or not (measured likewise).
  double frozen_head_input() const { return tied() && c.table_frozen && l.tp == 1 ? e * d : 0; }
  double head_per_token() const { return head_bytes_per_token(l) - frozen_head_input(); }
  // What of them the head's own backward still holds once the loss's backward has run.
  double final_norm_per_token() const { return final_norm_bytes_per_token(l) - frozen_head_input(); }

  // The saved activations of blocks [0, blocks) and the micro-batch: each block's go after its backward.
  // `recomputing`: the last of them is being recomputed. `done`: the stage's parameters whose backward
  // has run in this micro-batch (pipeline_terms).
  // Blocks [0, K) run forward only (ParameterCounts::forward_only_blocks) and save nothing.
  std::vector<MemoryTerm> saved_blocks(int blocks, double done, bool recomputing = false) const {
    std::vector<MemoryTerm> out;
    int whole = 0, partitioned = 0;
    for (int i = K; i < blocks; ++i) {
      if (!whole_block(i)) continue;
      ++whole;
      // Partitioned inputs (activation_checkpointing.partition_activations), measured with the
      // counting allocator: the model's first block's input stays whole (the embeddings' output,
      // which the forward still holds), and a block being recomputed has its input gathered whole.
      if (stage.model_block(i) != 0 && !(recomputing && i == blocks - 1)) ++partitioned;
    }
    const int kept = std::max(0, blocks - K) - whole;
    if (kept > 0) {
      const double per_token = selective() ? selective_block_bytes_per_token(l) : block_bytes_per_token(l);
      out.push_back(term(std::string("activations: blocks' saved tensors") + (selective() ? " (attention core recomputed)" : ""),
                         MemoryKind::Activations, kept * per_token * T,
                         blocks_text(kept) + " × " + plain(per_token) + " B/token × " + tokens()));
    }
    const double input = block_input_per_token(), piece = checkpointed_block_bytes_per_token(l);
    if (piece == input) partitioned = 0;
    if (inputs_on_host()) {
      for (auto& t : host_checkpoint_terms(blocks, whole, recomputing, piece)) out.push_back(std::move(t));
    } else {
      if (whole > partitioned)
        out.push_back(term("activations: recomputed blocks' inputs", MemoryKind::Activations, (whole - partitioned) * input * T,
                           blocks_text(whole - partitioned) + " × 4d B/token" + (l.sequence_parallel ? " / tp" : "") + " × " + tokens()));
      if (partitioned > 0)
        out.push_back(term("activations: recomputed blocks' inputs, partitioned over tp", MemoryKind::Activations, partitioned * piece * T,
                           blocks_text(partitioned) + " × 4d/tp B/token × " + tokens()));
    }
    const int segments = whole + (selective() ? kept : 0);
    if (segments > 0 && generator_state_bytes(l) > 0)
      out.push_back(term("activations: generator states of checkpointed segments", MemoryKind::Activations,
                         segments * generator_state_bytes(l), std::to_string(segments) + " × " + plain(generator_state_bytes(l)) + " B"));
    out.push_back(batch_tokens());
    for (auto& t : vision_terms()) out.push_back(std::move(t));
    for (auto& t : pipeline_terms(done)) out.push_back(std::move(t));
    for (auto& t : contiguous_buffer_slack(whole + pieces_in_flight(done))) out.push_back(std::move(t));
    return out;
  }

  // activation_checkpointing.cpu_checkpointing on a GPU: the kept inputs (their pieces under
  // partition_activations, in the buffer's slots under contiguous_memory_optimization) live in pinned
  // host memory (model/activation_store.h). The micro-batch in backward keeps on the device the input
  // of each chunk's first block (the embeddings' output, which its forward still holds, or the input
  // a pipeline stage received) and the copy of the block being recomputed; another micro-batch in
  // flight only a received input. Measured on an H200: one rank +0.7% to +2.5%; pp 2 under 1F1B
  // with full recomputation moved 4 block inputs off stage 0's device and 1 off stage 1's, as counted.
  bool inputs_on_host() const { return l.activation_checkpointing.store.host_memory && !l.device_is_cpu; }
  bool starts_a_chunk(int i) const {
    for (size_t k = 0; k < stage.chunks.size(); ++k)
      if (first_block_of_chunk(k) == i) return true;
    return false;
  }
  std::vector<MemoryTerm> host_checkpoint_terms(int blocks, int whole, bool recomputing, double piece) const {
    std::vector<MemoryTerm> out;
    if (whole == 0) return out;
    int held = 0;
    for (int i = K; i < blocks; ++i) held += starts_a_chunk(i) && whole_block(i);
    const bool recomputed_is_held = starts_a_chunk(blocks - 1) && whole_block(blocks - 1);
    const int on_device = held + int(recomputing && !recomputed_is_held);
    if (on_device > 0)
      out.push_back(term("activations: recomputed blocks' inputs on the device (each chunk's first, the one being recomputed)",
                         MemoryKind::Activations, on_device * block_input_per_token() * T,
                         blocks_text(on_device) + " × 4d B/token" + (l.sequence_parallel ? " / tp" : "") + " × " + tokens()));
    out.push_back(term("activations: recomputed blocks' inputs in pinned host memory (cpu_checkpointing)", MemoryKind::Activations,
                       whole * piece * T, blocks_text(whole) + " × " + plain(piece) + " B/token × " + tokens(), MemoryPlace::Host));
    return out;
  }
  // A micro-batch in flight's checkpointed inputs on chunk `c`, per token, on the device: under
  // cpu_checkpointing on a GPU only the input the chunk received.
  double checkpointed_bytes_per_token(size_t c, int whole) const {
    if (!inputs_on_host()) return whole * checkpointed_block_bytes_per_token(l);
    const int first = first_block_of_chunk(c);
    return !stage.chunks[c].first && first >= K && whole_block(first) ? block_input_per_token() : 0;
  }

  // activation_checkpointing.contiguous_memory_optimization: the kept pieces of checkpointed inputs
  // live in one buffer of number_checkpoints slots, allocated whole at the first checkpoint and kept
  // for the run (model/activation_store.h). The other terms count the pieces held at a moment, so the
  // buffer adds its free slots. Measured with the counting allocator: slots as many as the inputs
  // checkpointed change nothing at the peak; each spare slot adds one piece.
  std::vector<MemoryTerm> contiguous_buffer_slack(int pieces_held) const {
    const ActivationStoreOptions& store = l.activation_checkpointing.store;
    const int free_slots = store.slots - pieces_held;
    if (!store.contiguous || free_slots <= 0) return {};
    const double piece = checkpointed_block_bytes_per_token(l);
    return {term("activations: the contiguous checkpoint buffer's free slots", MemoryKind::Activations, free_slots * piece * T,
                 std::to_string(free_slots) + " of " + std::to_string(store.slots) + " slots (number_checkpoints) × " + plain(piece) +
                     " B/token × " + tokens(),
                 inputs_on_host() ? MemoryPlace::Host : MemoryPlace::Device)};
  }
  int whole_blocks_of_chunk(size_t c) const {
    int whole = 0;
    for (int i = first_block_of_chunk(c); i < first_block_of_chunk(c) + stage.chunks[c].blocks; ++i) whole += whole_block(i);
    return whole;
  }
  // The checkpointed pieces of the other micro-batches a pipeline stage holds at its busiest backward.
  int pieces_in_flight(double done) const {
    if (!stage.pipelined()) return 0;
    const PipelineMoment& at = busiest_moment(done);
    int pieces = 0;
    for (size_t c = 0; c < stage.chunks.size(); ++c) pieces += (at.held[c] - 1) * whole_blocks_of_chunk(c);
    return pieces;
  }

  // A vision-language model's images and the vision side's saved tensors, alive through the LLM's
  // backward: the vision side's backward runs last.
  std::vector<MemoryTerm> vision_terms() const {
    if (!l.model.is_vlm()) return {};
    std::vector<MemoryTerm> out = vision_saved_terms(l, c);
    out.push_back(vision_batch_term(l));
    return out;
  }

  // The encoder's last block's backward: the LLM's activations are gone, the encoder's still held.
  // ZeRO-3 gathers the block and prefetches the one before it; the unit whose gradients it
  // reduce-scatters meanwhile is the final norm's, the part after the last block (measured with a
  // wide encoder, where this moment is the peak: a block's send buffer is not alive here).
  StepMoment vision_block_backward() const {
    StepMoment m{"the vision encoder's last block's backward", vision_block_backward_terms(l, c)};
    for (auto& t : contiguous_buffer_slack(0)) m.terms.push_back(std::move(t));
    m.terms.push_back(batch_tokens());
    m.terms.push_back(vision_batch_term(l));
    if (l.zero_stage == 3) {
      const double final_norm = double(l.model.vision.final_norm_parameters());
      m.terms.push_back(term("ZeRO-3 gathered units: two vision blocks, and the final norm's send buffer", MemoryKind::Communication,
                             2 * vision_block_unit_bytes(l) + 4 * final_norm, "2 × a vision block's unit + 4 × 2d_v"));
    }
    return m;
  }

  // A pipeline step loads all its micro-batches at its start. Under cp every rank loads the whole
  // rows, cp·T tokens, and keeps copies of its part of them (SequenceLayout::take): the ids for the
  // embeddings' backward and the targets for the loss's, 8 B/token each, alive while the micro-batch
  // is (pipeline_terms counts them for a pipeline's micro-batches in flight).
  MemoryTerm batch_tokens() const {
    const std::string rows = l.cp > 1 ? "16 B/token × cp·T, " + tokens() : "16 B/token × " + tokens();
    const double whole = kBatchBytesPerToken * T * l.cp;
    if (!stage.pipelined()) {
      if (l.cp == 1) return term("micro-batch tokens and targets", MemoryKind::Activations, whole, rows);
      return term("micro-batch tokens and targets: the whole rows, and this rank's part of each", MemoryKind::Activations,
                  whole + kBatchBytesPerToken * T, "16 B/token × cp·T + 16 B/token × T, " + tokens());
    }
    return term("the step's micro-batches' tokens and targets" + std::string(l.cp > 1 ? " (whole rows)" : ""), MemoryKind::Activations,
                stage.micro_batches * whole, std::to_string(stage.micro_batches) + " micro-batches × " + rows);
  }

  // What a pipeline stage holds at its busiest backward besides the micro-batch it runs: the other
  // (micro-batch, chunk) pairs in flight, each with its chunk's activations (and the head's, on the
  // model's last chunk), and the boundary tensors [micro-batch, seq, d] in fp32 (pipeline_runner.h)
  // alive then. Both are counted from the schedule's action lists (pipeline_stage.h). `done`: the
  // stage's parameters whose backward has run in the micro-batch at hand.
  std::vector<MemoryTerm> pipeline_terms(double done) const {
    if (!stage.pipelined()) return {};
    std::vector<MemoryTerm> out;
    const PipelineMoment& at = busiest_moment(done);
    const double others = held_bytes_per_token(at) - micro_batch_bytes_per_token();
    if (others > 0)
      out.push_back(term("activations: the other micro-batches in flight (" + schedule_name(l.schedule) + ")", MemoryKind::Activations,
                         others * T, held_text(at) + " less one micro-batch = " + plain(others) + " B/token × " + tokens()));
    const int pieces = pieces_in_flight(done);
    if (inputs_on_host() && pieces > 0) {
      const double piece = checkpointed_block_bytes_per_token(l);
      out.push_back(term("activations: the other micro-batches' recomputed blocks' inputs in pinned host memory", MemoryKind::Activations,
                         pieces * piece * T, blocks_text(pieces) + " × " + plain(piece) + " B/token × " + tokens(), MemoryPlace::Host));
    }
    const double stored = stored_bytes_per_token(at);
    if (stored > 0) {
      std::string formula;
      for (size_t c = 0; c < stage.chunks.size(); ++c)
        formula += (formula.empty() ? "" : " + ") + std::to_string(at.stored[c]) + " × " + plain(stored_bytes_per_token(c)) + " B/token";
      out.push_back(term("zero_bubble: what the I of micro-batches waiting for their W leaves (linear layers' inputs and output gradients)",
                         MemoryKind::Activations, stored * T, formula + " × " + tokens()));
    }
    if (l.cp > 1) {
      int parts = 0;
      for (size_t c = 0; c < stage.chunks.size(); ++c)
        parts += (stage.chunks[c].first ? at.held[c] : 0) + (stage.chunks[c].last ? at.held[c] : 0);
      if (parts > 0)
        out.push_back(term("cp: this rank's part of the ids (first chunk) or targets (last chunk) of each micro-batch in flight",
                           MemoryKind::Activations, parts * 8 * T, std::to_string(parts) + " × 8 B/token × " + tokens()));
    }
    // Under sequence parallelism a stage hands on this tp rank's part of the sequence.
    if (at.buffers > 0)
      out.push_back(term("pipeline boundary buffers: sends until the peer has read them, receives posted a compute ahead",
                         MemoryKind::Communication, at.buffers * 4 * T * d * sp_share(),
                         std::to_string(at.buffers) + " × 4·T·d" + (l.sequence_parallel ? " / tp" : "")));
    // ZeRO-3 under pp (fully_sharded_parameters.h's hold_whole): the schedule runs each part once per
    // micro-batch in its own order, so every unit of the stage is gathered once for the step and held
    // until its gradients are reduce-scattered after the step's last backward; meanwhile autograd
    // accumulates the micro-batches' gradients whole into the parameters (the gradient shard is
    // filled only then). The units as they are gathered (under mixed precision the blocks' matmul
    // weights in 16 bits, the tied table in fp32 beside its rounded copy: block_unit_bytes()), the
    // gradients in fp32, on top of the shards: the tiny model's stages measure 8Ψ_stage over the
    // shards' 16Ψ_stage/dp at dp 1 and 2 in fp32, and the demo model's the blocks' 16-bit flat units
    // and fp32 gradients per weight under bf16 (the counting allocator's live tensors at the peak).
    // A chunk's gradients all exist once one of its backwards has run in the step; before that, only
    // those of the parts whose backward ran in this one (one micro-batch a step, or the first
    // backward: 2 micro-batches at pp 2 peak there, at stage 0's first, under bf16).
    if (l.zero_stage == 3) {
      // Frozen blocks are in no unit.
      const double units =
          (L - K) * block_unit_bytes() + (stage.first ? embeddings_unit_bytes() : 0) + (stage.last ? head_unit_bytes() : 0);
      out.push_back(term("ZeRO-3 units of the stage, gathered once per step and held through it", MemoryKind::Communication, units,
                         e < 4 ? "each unit gathered, blocks' matmul weights in e bytes" : "4Ψ_stage = 4 × " + std::to_string(c.total)));
    }
    // ZeRO-2 under pp reduces once a step too (train/step_executor.cpp turns the gradient sync off
    // until the step's last backward): autograd holds the same whole gradients meanwhile (the demo
    // model at dp 2 × pp 2 measured 5.6-9.8% over without them).
    const double existing = gradients_existing(at, done);
    if (existing > 0)
      out.push_back(term("gradients: autograd's, whole, until the reduce-scatter after the step's last backward", MemoryKind::Gradients,
                         4 * existing, existing == double(c.total) ? "4Ψ_stage = 4 × " + std::to_string(c.total)
                                                                    : "4 × the " + plain(existing) + " parameters whose backward ran"));
    return out;
  }

  // The stage's index of local chunk `c`'s first block.
  int first_block_of_chunk(size_t c) const {
    int before = 0;
    for (size_t k = 0; k < c; ++k) before += stage.chunks[k].blocks;
    return before;
  }
  // One micro-batch's saved activations on local chunk `c`, per token: its blocks' and, on the model's last chunk, the head's.
  double chunk_bytes_per_token(size_t c) const {
    const PipelineChunk& chunk = stage.chunks[c];
    const int before = first_block_of_chunk(c);
    double bytes = 0;
    const bool sel = selective();
    int whole = 0;
    for (int i = std::max(before, K); i < before + chunk.blocks; ++i) {
      whole += whole_block(i);
      if (!whole_block(i)) bytes += sel ? selective_block_bytes_per_token(l) : block_bytes_per_token(l);
    }
    return bytes + checkpointed_bytes_per_token(c, whole) + (chunk.last ? head_per_token() : 0);
  }
  // One micro-batch through every chunk of the stage: what the backward moments count as the micro-batch they run.
  double micro_batch_bytes_per_token() const {
    double bytes = 0;
    for (size_t c = 0; c < stage.chunks.size(); ++c) bytes += chunk_bytes_per_token(c);
    return bytes;
  }
  double held_bytes_per_token(const PipelineMoment& at) const {
    double bytes = 0;
    for (size_t c = 0; c < stage.chunks.size(); ++c) bytes += at.held[c] * chunk_bytes_per_token(c);
    return bytes;
  }
  std::string held_text(const PipelineMoment& at) const {
    std::string out;
    for (size_t c = 0; c < stage.chunks.size(); ++c)
      out += (out.empty() ? "" : " + ") + std::to_string(at.held[c]) + " × " + plain(chunk_bytes_per_token(c)) + " B/token";
    return out;
  }
  // ZeRO-2 and 3 under pp: the parameters whose gradients autograd holds whole at `at`: the chunks'
  // with a backward run before it in the step, else the `done` of the one running.
  double gradients_existing(const PipelineMoment& at, double done) const {
    if (l.zero_stage < 2) return 0;
    double params = at.backwards_done[size_t(at.chunk)] == 0 ? done : 0;
    for (size_t k = 0; k < stage.chunks.size(); ++k) {
      const PipelineChunk& chunk = stage.chunks[k];
      if (at.backwards_done[k] > 0)
        params += double(trained_blocks_of_chunk(k)) * c.block + (chunk.first && c.forward_only_blocks == 0 ? c.embeddings : 0) +
                  (chunk.last ? c.head : 0);
    }
    return params;
  }
  // The backward of the step that begins with the most held: activations in flight, boundary buffers
  // and, under ZeRO-3, the gradients that exist.
  const PipelineMoment& busiest_moment(double done) const {
    const auto bytes = [&](const PipelineMoment& at) {
      return (held_bytes_per_token(at) + stored_bytes_per_token(at)) * T + at.buffers * 4 * T * d + 4 * gradients_existing(at, done);
    };
    return *std::max_element(stage.moments.begin(), stage.moments.end(),
                             [&](const PipelineMoment& a, const PipelineMoment& b) { return bytes(a) < bytes(b); });
  }

  // The head's gradient of a tied table, which autograd holds until the lookup's gradient joins it
  // at the end of backward (DDP and ZeRO 1-2 add it into the flat gradient or a bucket then).
  std::vector<MemoryTerm> tied_gradient_held() const {
    if (!tied_trained() || table_in_rows() || !(stage.first && stage.last)) return {};
    return {term("gradients: the head's, of the tied table, held to the end of backward", MemoryKind::Gradients, 4.0 * c.table,
                 "4·V·d")};
  }

  // The loss's gradient of the logits, e·T·V (fp32 under tp).
  MemoryTerm logits_gradient() const {
    const double logits = logits_gradient_bytes_per_token(l);
    return term("backward: the logits' gradient", MemoryKind::Activations, logits * T,
                (l.tp == 1 ? "e·T·V" : "(4 + e)·T·ceil(V/tp), e only in 16 bits") + std::string(" = ") + plain(logits) + " B/token × " + tokens());
  }

  MemoryTerm gathered_units(bool with_table) const {
    double units = l.reshard_after_forward ? block_unit_bytes() : L * block_unit_bytes();
    units += head_unit_bytes() + (with_table ? embeddings_unit_bytes() : 0);
    return term("ZeRO-3 gathered units: " + std::string(l.reshard_after_forward ? "the last block, " : "every block, ") + "the head" +
                    (with_table ? ", the tied embeddings" : ""),
                MemoryKind::Communication, units, "whole units, matmul weights in e bytes");
  }

  StepMoment head_backward() const {
    StepMoment m{table_in_rows() ? "the loss's backward" : "the head's backward begins", saved_blocks(L, 0)};
    const double head = head_per_token();
    m.terms.push_back(term("activations: final norm and loss", MemoryKind::Activations, head * T, plain(head) + " B/token × " + tokens()));
    m.terms.push_back(logits_gradient());
    if (l.zero_stage == 3 && !stage.pipelined()) m.terms.push_back(gathered_units(tied_trained() && !table_in_rows()));
    return m;
  }

  // Under ZeRO-3 with the table in rows the head's backward reads the table a block of rows at a
  // time (row_blocked_layers.cpp), after the loss's backward has freed the logits it saved (its
  // e·V + 4 bytes a token): the moment above is then the loss's backward, and this one the head's
  // row loop. The counting allocator's live allocations there on GPT-2 124M: the logits' gradient,
  // its columns of the block being multiplied copied contiguous, the input gradient being summed
  // (fp32, T·d), and at the weight gradient the next block gathering while this block's gradient
  // and its reduce-scatter buffer are alive (the block itself is released first: the weight
  // gradient does not read it).
  StepMoment head_row_loop() const {
    StepMoment m{"the head's backward, a block of the table's rows at a time", saved_blocks(L, 0)};
    const double norm = final_norm_per_token();
    m.terms.push_back(term("activations: final norm", MemoryKind::Activations, norm * T, plain(norm) + " B/token × " + tokens()));
    m.terms.push_back(logits_gradient());
    const double rows = row_block_bytes() / 4 / d;
    m.terms.push_back(term("backward: the logits' gradient's columns of a block of rows, contiguous, and the input gradient",
                           MemoryKind::Activations, e * T * rows + 4 * T * d, "e·T·ceil(V / blocks) + 4·T·d"));
    m.terms.push_back(gathered_units(false));
    m.terms.push_back(term("ZeRO-3 table rows: the next block gathering, a block's gradient and its send buffer", MemoryKind::Communication,
                           3 * row_block_bytes(), "3 × 4·ceil(V / blocks)·d"));
    // From an offloaded shard the gathering block's piece is on its way too (offload_states.h).
    if (parameter_shard_place(l) != MemoryPlace::Device)
      m.terms.push_back(term("ZeRO-3 offloaded shard: the piece of the table's rows being gathered", MemoryKind::Communication,
                             std::ceil(row_block_bytes() / l.dp_shard), "4·ceil(V / blocks)·d / dp"));
    return m;
  }

  // The gradient working set of a block's backward besides the activations: the gradient flowing in
  // (fp32, T·d), the MLP's input gradients, and the down projection's weight gradient before autograd
  // adds it where it is kept. Measured with the counting allocator: GPT-2 in fp32 holds one fp32
  // T·f gradient and the f·d weight gradient; Llama in fp32 SwiGLU's two (gate's, up's) after the
  // weight gradient was added; under mixed precision both hold two compute-type T·f gradients and
  // a weight gradient of the compute type's size.
  // Under zero_bubble the weight gradient waits for W, and the MLP's output gradients (GPT-2's one,
  // Llama's two), stored for it, stay beside the gradient they came from, in the compute type:
  // 4·T·d + 2e·T·f for GPT-2, 4·T·d + 3e·T·f for Llama (the counting allocator's live tensors at the
  // tiny model's peaks in fp32; bf16 on the tiny and demo models).
  MemoryTerm block_working_set() const {
    double per_f = 4, weight = 4 * f * d;
    std::string formula = "4·T·d + 4·T·f + 4·f·d";
    if (zero_bubble()) {
      per_f = (l.model.is_llama() ? 3 : 2) * e;
      weight = 0;
      formula = l.model.is_llama() ? "4·T·d + 3e·T·f" : "4·T·d + 2e·T·f";
    } else if (e < 4) {
      per_f = 2 * e;
      weight = e * f * d;
      formula = "4·T·d + 2e·T·f + e·f·d";
    } else if (l.model.is_llama()) {
      per_f = 8;
      weight = 0;
      formula = "4·T·d + 8·T·f";
    }
    // Under sequence parallelism the gradient flowing in is the rank's share of the tokens, which the
    // down projection's backward gathers whole (4·T·d): still alive beside GPT-2's MLP gradients (the
    // counting allocator's live tensors at the tiny and demo models' first stage at tp 2 + sp, +4.8%
    // and +2.1% without it), given back before Llama's SwiGLU ones (-5.1% and -1.7% with it).
    const double gathered = l.sequence_parallel && !l.model.is_llama() ? 4 * T * d : 0;
    if (l.tp > 1) formula += " (f = d_ff/tp" + std::string(l.sequence_parallel ? ", T·d over tp)" : ")");
    if (gathered > 0) formula += " + 4·T·d gathered";
    return term("backward: a block's gradient working set", MemoryKind::Activations,
                4 * T * d * sp_share() + per_f * T * f + weight + gathered, formula);
  }

  // Block `i`'s backward, blocks [0, i] still holding their activations. DDP and ZeRO-1 add each
  // gradient into the flat buffer as it comes, so the last block's is their busiest; ZeRO-2 keeps
  // autograd's gradients until their bucket is full (a small model's one bucket: all of them, by the
  // first block's backward), and ZeRO-3 reduce-scatters each block's as the block before it runs.
  StepMoment block_backward(int i) const {
    StepMoment m{i == L - 1 ? "the last block's backward" : i == 0 ? "the first block's backward" : "block " + std::to_string(i) + "'s backward",
                 saved_blocks(i + 1, double(L - 1 - i) * c.block + c.head, whole_block(i))};
    if (whole_block(i)) {
      // Recomputed with its activations kept this time, its output too, under the generator state it ran under.
      const double per_token = block_bytes_per_token(l) + 4 * d;
      m.terms.push_back(term("activations: the block recomputed (and its output)", MemoryKind::Activations,
                             per_token * T + generator_state_bytes(l), plain(per_token) + " B/token × " + tokens()));
    }
    m.terms.push_back(block_working_set());
    // zero_bubble: what this micro-batch's I has left to its W so far, the head's and the blocks' after i.
    const double stored = (stage.last ? head_store_per_token() : 0) + (L - 1 - i) * block_store_per_token();
    if (zero_bubble() && stored > 0)
      m.terms.push_back(term("zero_bubble: what this micro-batch's I has left to its W so far", MemoryKind::Activations, stored * T,
                             plain(stored) + " B/token × " + tokens()));
    for (auto& t : tied_gradient_held()) m.terms.push_back(std::move(t));
    for (auto& t : sixteen_bit_bucket_copies(double(L - 1 - i) * c.block + c.head)) m.terms.push_back(std::move(t));
    if (l.zero_stage == 2 && !stage.pipelined()) {
      // Autograd's gradients of the blocks after i and of the head, until their bucket is full.
      const double after = double(L - 1 - i) * c.block + c.head, bucket = double(l.reduce_bucket_elements);
      m.terms.push_back(term("gradients: autograd's, waiting for their bucket", MemoryKind::Gradients, 4 * std::min(after, bucket),
                             "4 × min(gradients since the last bucket, reduce_bucket_size)"));
      // The send buffers of the buckets launched so far, until their reduce-scatters complete: at
      // most two, as a bucket is copied only once at most one other is in flight
      // (parallel/zero/reduce_scatter_grads.h). A bucket closes at the parameter that takes it to
      // reduce_bucket_size, so each may be larger by up to that parameter: the demo model at dp 4
      // in buckets of 500,000 elements (about 593,000 each) measures +4.2%.
      const double sends = std::min(2.0, std::floor(after / bucket));
      if (sends > 0)
        m.terms.push_back(term("ZeRO reduce-scatter send buffers of the buckets in flight", MemoryKind::Communication, 4 * sends * bucket,
                               plain(sends) + " × 4 × reduce_bucket_size"));
    }
    if (l.zero_stage == 3 && !stage.pipelined()) {
      m.terms.push_back(term("ZeRO-3 gathered units: the block computing and the one prefetched", MemoryKind::Communication,
                             2 * block_unit_bytes(), "2 × a block's unit"));
      if (i < L - 1)
        m.terms.push_back(term("ZeRO-3 reduce-scatter send buffer of the block after it", MemoryKind::Communication, 4.0 * c.block,
                               "4 × a block's parameters"));
      else if (!tied())
        m.terms.push_back(term("ZeRO-3 reduce-scatter send buffer of the head", MemoryKind::Communication, 4.0 * c.head, "4 × the head's parameters"));
      for (auto& t : offloaded_piece_terms(l, c, i)) m.terms.push_back(std::move(t));
    }
    return m;
  }

  // The lookup's gradient of the table (dense) beside the head's, until autograd adds them.
  StepMoment embeddings_backward() const {
    StepMoment m{"the embeddings' backward", tied_gradient_held()};
    m.terms.push_back(batch_tokens());
    for (auto& t : vision_terms()) m.terms.push_back(std::move(t));
    for (auto& t : pipeline_terms(double(L) * c.block + c.head)) m.terms.push_back(std::move(t));
    for (auto& t : contiguous_buffer_slack(pieces_in_flight(double(L) * c.block + c.head))) m.terms.push_back(std::move(t));
    m.terms.push_back(term("gradients: the lookup's, of the table", MemoryKind::Gradients, 4.0 * c.table, "4·V·d"));
    if ((l.zero_stage == 2 || l.zero_stage == 3) && !stage.pipelined()) {
      // The embeddings' bucket is copied into a send buffer, in rounds of at most two bucket sizes.
      const double bucket = l.zero_stage == 3 ? double(c.embeddings) : std::min(double(c.embeddings), double(l.reduce_bucket_elements));
      const double send = std::min(bucket, 2.0 * l.reduce_bucket_elements);
      m.terms.push_back(term("ZeRO reduce-scatter send buffer of the embeddings' bucket", MemoryKind::Communication, 4 * send,
                             "4 × min(bucket, 2 × reduce_bucket_size)"));
      // A send buffer goes when its reduce-scatter completes, which waits for the slowest rank: the
      // blocks' last bucket may still be in flight while the lookup's gradient is computed, never
      // more (a bucket is copied only once at most one other reduction is in flight, and one that
      // goes in rounds once none is: parallel/zero/reduce_scatter_grads.h).
      const double blocks = double(L) * c.block, bucket_size = double(l.reduce_bucket_elements);
      if (l.zero_stage == 2 && blocks > bucket_size)
        m.terms.push_back(term("ZeRO reduce-scatter send buffer of the blocks' last bucket, in flight", MemoryKind::Communication,
                               4 * std::max(double(c.block), bucket_size), "4 × max(a block, reduce_bucket_size)"));
    }
    return m;
  }

  // Under sequence parallelism the head's column-parallel backward works on the whole sequence
  // (parallel/tensor/column_parallel_linear.cpp; the counting allocator's live allocations at this
  // peak on the demo model, fp32 and bf16, with and without pp): its input being gathered again for
  // the weight gradient (e·T·d), the full input gradient (4·T·d) beside its copy reordered for the
  // reduce-scatter (4·T·d) and the rank's share that receives it (4·T·d/tp), with the logits'
  // gradient it came from and the final norm's saved tensors; the loss's are gone.
  StepMoment sequence_parallel_head_backward() const {
    StepMoment m{"the head's backward (sequence-parallel: its input gathered again, its gradient reordered for the reduce-scatter)",
                 saved_blocks(L, 0)};
    const double norm = final_norm_per_token();
    m.terms.push_back(term("activations: final norm", MemoryKind::Activations, norm * T, plain(norm) + " B/token × " + tokens()));
    m.terms.push_back(logits_gradient());
    m.terms.push_back(term("sequence parallelism: the head's input gathered again, its full input gradient and the reordered copy",
                           MemoryKind::Communication, (e + 4 + 4) * T * d + 4 * T * d / l.tp, "(e + 8)·T·d + 4·T·d/tp"));
    return m;
  }

  // DDP and ZeRO-1 under 16-bit gradient accumulation (data_types.grad_accum_dtype) send each bucket
  // as a copy in the compute type, reduced in place and copied back into the fp32 gradient once
  // every bucket is reduced (parallel/ddp/data_parallel.cpp). ZeRO-2's and 3's send buffers shrink
  // instead, under their 4-byte terms.
  bool sends_16bit_copies() const { return l.grad_accum_16bit && e < 4 && l.zero_stage <= 1; }
  // During backward, the copies of the buckets complete so far: those of the `done` gradients, in
  // whole buckets of reduce_bucket_size. A bucket closes at the entry that reaches that size, and the
  // block's own first weight gradients may complete one, so this can count one bucket short: the
  // demo model in bf16 with 8 buckets, one sequence a micro-batch, measures +2.7% (DDP) and +3.4%
  // (ZeRO-1) over it, against +1.2% for the same run without the copies.
  std::vector<MemoryTerm> sixteen_bit_bucket_copies(double done) const {
    if (!sends_16bit_copies() || stage.pipelined()) return {};
    const double bucket = double(l.reduce_bucket_elements), sent = std::floor(done / bucket) * bucket;
    if (sent <= 0) return {};
    return {term("data parallelism: 16-bit copies of the buckets reduced so far", MemoryKind::Communication, e * sent,
                 "e × the gradients computed, in whole buckets of reduce_bucket_size")};
  }
  // Backward's end: every bucket's copy at once, before they are copied back.
  StepMoment sixteen_bit_copies_back() const {
    StepMoment m{"backward's end: every bucket's 16-bit copy, before it is copied back", {batch_tokens()}};
    m.terms.push_back(term("data parallelism: 16-bit copies of every bucket", MemoryKind::Communication, e * double(c.trainable()),
                           "e·Ψ (the trainable parameters)"));
    return m;
  }

  // ZeRO 1-2 launch the all-gathers of the updated shard after the step; their send buffers (the
  // rank's shard, copied) live into the next forward pass. Buckets kept whole are not gathered.
  StepMoment optimizer_step() const {
    StepMoment m{"the optimizer step", contiguous_buffer_slack(0)};
    if (l.zero_stage == 1 || l.zero_stage == 2)
      m.terms.push_back(term("ZeRO all-gather send buffers of the updated shard", MemoryKind::Communication,
                             4.0 * shard_numel(c.trainable() - c.kept_whole, l.dp_shard),
                             c.kept_whole > 0 ? "4(Ψ - W)/dp" : "4Ψ/dp"));
    return m;
  }
};

}  // namespace

double StepMoment::bytes() const {
  double sum = 0;
  for (const auto& t : terms) sum += t.bytes;
  return sum;
}

std::vector<StepMoment> step_moments(const MemoryLayout& layout, const ParameterCounts& counts, const PipelineStage& stage) {
  const Step s(layout, counts, stage);
  const int L = counts.blocks;
  std::vector<StepMoment> moments;
  if (stage.last) moments.push_back(s.head_backward());
  if (stage.last && s.table_in_rows()) moments.push_back(s.head_row_loop());
  // Backward goes down the blocks to the first that is not forward only (K).
  const int K = s.K;
  if (K < L) moments.push_back(s.block_backward(L - 1));
  if (layout.sequence_parallel && stage.last) moments.push_back(s.sequence_parallel_head_backward());
  // ZeRO-2's gradients grow as backward goes down the blocks, and so do zero_bubble's stores (each
  // block's I leaves them); ZeRO-3's send buffer joins from the second-last.
  if ((layout.zero_stage == 2 || s.zero_bubble()) && L - K > 1) moments.push_back(s.block_backward(K));
  if (layout.zero_stage == 3 && L - K > 1) moments.push_back(s.block_backward(L - 2));
  if (s.tied_trained() && !s.table_in_rows() && stage.first) moments.push_back(s.embeddings_backward());
  if (layout.model.is_vlm() && !counts.vision_frozen) moments.push_back(s.vision_block_backward());
  if (s.sends_16bit_copies()) moments.push_back(s.sixteen_bit_copies_back());
  moments.push_back(s.optimizer_step());
  return moments;
}

}  // namespace dtrain

// The estimate's closed forms against values computed by hand: the parameter counts, the model
// states at each ZeRO stage (the ZeRO paper's 2Ψ/2Ψ/KΨ as dtrain keeps them), the activations per
// token (Korthikanti et al.'s count under dtrain's assumptions), one whole estimate term by term, and
// the layouts it refuses. The measured comparison is test_estimate_measured.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "tools/estimate/activation_memory.h"
#include "tools/estimate/memory_estimate.h"
#include "tools/estimate/model_states.h"
#include "tools/estimate/pipeline_stage.h"
#include "tools/estimate/step_peak.h"
#include "tools/estimate/vision_memory.h"
#include "model/parameter_shapes.h"
#include "train/config_schema.h"
#include "train/estimate_layout.h"

namespace dtrain {
namespace {

MemoryLayout layout_of(const std::string& preset, int dp = 1, int stage = 0, int compute_bytes = 4) {
  MemoryLayout l;
  l.model = model_preset(preset);
  l.dp = l.dp_shard = dp;
  l.zero_stage = stage;
  l.compute_bytes = compute_bytes;
  return l;
}

template <typename Keep>
double bytes_of(const std::vector<MemoryTerm>& terms, Keep keep) {
  double sum = 0;
  for (const auto& t : terms)
    if (keep(t)) sum += t.bytes;
  return sum;
}

double term_bytes(const std::vector<MemoryTerm>& terms, MemoryKind kind) {
  return bytes_of(terms, [kind](const MemoryTerm& t) { return t.kind == kind; });
}

double place_bytes(const std::vector<MemoryTerm>& terms, MemoryPlace place) {
  return bytes_of(terms, [place](const MemoryTerm& t) { return t.place == place; });
}

TEST(ParameterCounts, PartsAddUpToTheModelsCount) {
  for (const std::string& preset : model_preset_names()) {
    const TransformerConfig m = model_preset(preset);
    const ParameterCounts c = parameter_counts(m);
    EXPECT_EQ(c.total, m.parameter_count()) << preset;
    if (m.is_vlm()) continue;  // its largest part may be one of the vision side's
    EXPECT_EQ(std::max({c.block, c.embeddings, c.head}), m.largest_part_parameters()) << preset;
  }
  // The tiny GPT-2 by hand: a block is qkv 32·96 + 96, o 32·32 + 32, MLP 2·32·128 + 128 + 32 and two
  // LayerNorms 4·32; the embeddings 256·32 + 16·32; the final norm 2·32.
  const ParameterCounts tiny = parameter_counts(model_preset("tiny"));
  EXPECT_EQ(tiny.block, 3072 + 96 + 1024 + 32 + 8192 + 128 + 32 + 128);
  EXPECT_EQ(tiny.embeddings, 8192 + 512);
  EXPECT_EQ(tiny.head, 64);
  EXPECT_EQ(tiny.matmul, 2 * (3072 + 1024 + 8192) + 8192);  // the tied head reads wte's working copy
  EXPECT_EQ(parameter_counts(model_preset("gpt2-124m")).total, 124439808);
}

// GPT-2 124M at dp 4 in fp32 with AdamW: Ψ = 124,439,808, a shard ceil(Ψ/4) = 31,109,952.
TEST(ModelStates, ZeroStagesShardWhatThePaperSays) {
  const ParameterCounts c = parameter_counts(model_preset("gpt2-124m"));
  const double psi = 124439808, shard = 31109952;
  struct Expected {
    int stage;
    double parameters, gradients, optimizer;
  };
  for (const Expected& e : {Expected{0, 4 * psi, 4 * psi, 8 * psi}, Expected{1, 4 * psi, 4 * psi, 8 * shard},
                            Expected{2, 4 * psi, 4 * shard, 8 * shard}, Expected{3, 4 * shard, 4 * shard, 8 * shard}}) {
    const auto terms = model_state_terms(layout_of("gpt2-124m", 4, e.stage), c);
    EXPECT_EQ(term_bytes(terms, MemoryKind::Parameters), e.parameters) << "stage " << e.stage;
    EXPECT_EQ(term_bytes(terms, MemoryKind::Gradients), e.gradients) << "stage " << e.stage;
    EXPECT_EQ(term_bytes(terms, MemoryKind::OptimizerStates), e.optimizer) << "stage " << e.stage;
  }
  // bf16 adds 16-bit working copies of the matmul weights below stage 3: 12 blocks of 4·768² + 2·768·3072, and the tied table.
  const double matmul = 12 * (4.0 * 768 * 768 + 2.0 * 768 * 3072) + 50257.0 * 768;
  EXPECT_EQ(term_bytes(model_state_terms(layout_of("gpt2-124m", 4, 1, 2), c), MemoryKind::Parameters), 4 * psi + 2 * matmul);
  EXPECT_EQ(term_bytes(model_state_terms(layout_of("gpt2-124m", 4, 3, 2), c), MemoryKind::Parameters), 4 * shard);
  // SGD without momentum keeps no state.
  MemoryLayout sgd = layout_of("gpt2-124m");
  sgd.optimizer_bytes = 0;
  EXPECT_EQ(term_bytes(model_state_terms(sgd, c), MemoryKind::OptimizerStates), 0);
}

// The tiny GPT-2 (Ψ = 34,176: two blocks of 12,704, wte 8,192, wpe 512, the final norm 64) with its
// token table frozen and, as docs/training.md's per-module plan, block 0 kept whole (W = 12,704) in a
// ZeRO-3 run over 2 ranks: the trainable 25,984 hold the shard ceil((25,984 - 12,704) / 2) + 12,704 =
// 19,344; the frozen table stays whole beside it, with no gradient and no optimizer state.
TEST(ModelStates, FrozenAndKeptWholeParameters) {
  MemoryLayout l = layout_of("tiny", 2, 3);
  l.frozen = {"wte.weight"};
  for (const std::string& name : parameter_names(l.model))
    if (name.rfind("blocks.0.", 0) == 0) l.kept_whole.push_back(name);
  const ParameterCounts c = with_module_plan(parameter_counts(l.model), l);
  EXPECT_EQ(c.frozen, 8192);
  EXPECT_EQ(c.kept_whole, 12704);
  EXPECT_TRUE(c.table_frozen);
  EXPECT_EQ(c.sharded_numel(2), 6640 + 12704);
  const auto terms = model_state_terms(l, c);
  EXPECT_EQ(term_bytes(terms, MemoryKind::Parameters), 4.0 * 19344 + 4.0 * 8192);
  EXPECT_EQ(term_bytes(terms, MemoryKind::Gradients), 4.0 * 19344);
  EXPECT_EQ(term_bytes(terms, MemoryKind::OptimizerStates), 8.0 * 19344);
  // DDP with the table frozen: the flat buffer, its gradient and AdamW's moments hold the 25,984 trainable.
  MemoryLayout ddp = layout_of("tiny");
  ddp.frozen = {"wte.weight"};
  const auto ddp_terms = model_state_terms(ddp, with_module_plan(parameter_counts(ddp.model), ddp));
  EXPECT_EQ(term_bytes(ddp_terms, MemoryKind::Parameters), 4.0 * 34176);
  EXPECT_EQ(term_bytes(ddp_terms, MemoryKind::Gradients), 4.0 * 25984);
  EXPECT_EQ(term_bytes(ddp_terms, MemoryKind::OptimizerStates), 8.0 * 25984);
}

// Blocks run forward only when everything before them is frozen: the embeddings (GPT-2's token and
// position tables, Llama's token table) and each block before, whole. A trained table, a block
// frozen in part, or a vision-language model's connector ahead of the blocks leaves none.
TEST(ModelStates, BlocksFrozenWholeBehindFrozenEmbeddingsRunForwardOnly) {
  auto forward_only = [](const std::string& arch, std::vector<std::string> frozen) {
    MemoryLayout l = layout_of("tiny");
    l.model.arch = arch;
    l.model.n_layer = 4;
    for (const std::string& prefix : frozen)
      for (const std::string& name : parameter_names(l.model))
        if (name.rfind(prefix, 0) == 0) l.frozen.push_back(name);
    return forward_only_blocks(l);
  };
  EXPECT_EQ(forward_only("gpt2", {"wte.", "wpe.", "blocks.0.", "blocks.1."}), 2);
  EXPECT_EQ(forward_only("gpt2", {"wte.", "wpe.", "blocks.0.", "blocks.2."}), 1);
  EXPECT_EQ(forward_only("gpt2", {"wte.", "blocks.0.", "blocks.1."}), 0);  // the position table trains
  EXPECT_EQ(forward_only("gpt2", {"wte.", "wpe.", "blocks.0.ln1.", "blocks.1."}), 0);
  EXPECT_EQ(forward_only("llama", {"wte.", "blocks.0.", "blocks.1.", "blocks.2.", "blocks.3."}), 4);
  MemoryLayout vlm = layout_of("vlm-ocr");
  for (const std::string& name : parameter_names(vlm.model))
    if (name.rfind("llm.blocks.0.", 0) == 0 || name.rfind("llm.wte.", 0) == 0) vlm.frozen.push_back(name);
  EXPECT_EQ(forward_only_blocks(vlm), 0);
  // Covered, also under pp where the model's first chunk holds them; a frozen block in a later chunk
  // takes an input that requires its gradient, records its graph, and is not modelled.
  MemoryLayout l = layout_of("tiny");
  l.frozen = {"wte.weight", "wpe.weight"};
  for (const std::string& name : parameter_names(l.model))
    if (name.rfind("blocks.0.", 0) == 0) l.frozen.push_back(name);
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  l.pp = 2;
  l.accumulation = 2;
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  for (const std::string& name : parameter_names(l.model))
    if (name.rfind("blocks.1.", 0) == 0) l.frozen.push_back(name);
  EXPECT_NE(estimate_memory(l).no_estimate.find("no estimate for frozen blocks.1."), std::string::npos) << estimate_memory(l).no_estimate;
}

// Under tp a kept-whole parameter is this rank's piece of it, kept whole over dp: block 0 kept whole
// counts the rank's share of a block (q, k, v, gate and up a half of their rows, o and down a half of
// their columns, the norms and the row-parallel biases whole), as the closed form of
// parameter_counts gives it; the frozen table its 128 rows of 256. Llama with one key/value head at
// tp 2 keeps k and v whole on each rank.
TEST(ModelStates, UnderTpAKeptWholeParameterIsThisRanksPiece) {
  for (const std::string& arch : {"gpt2", "llama"}) {
    MemoryLayout l = layout_of("tiny", 2, 3);
    l.model.arch = arch;
    if (arch == "llama") l.model.n_kv_head = 1;
    l.tp = 2;
    l.frozen = {"wte.weight"};
    for (const std::string& name : parameter_names(l.model))
      if (name.rfind("blocks.0.", 0) == 0) l.kept_whole.push_back(name);
    const ParameterCounts per_rank = parameter_counts(l.model, 2);
    const ParameterCounts c = with_module_plan(per_rank, l);
    EXPECT_EQ(c.kept_whole, per_rank.block) << arch;
    EXPECT_LT(c.kept_whole, parameter_counts(l.model).block) << arch;
    EXPECT_EQ(c.frozen, 128 * 32) << arch;
    EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  }
}

// A frozen tied table gets no gradient: neither the head's nor the lookup's, so the step holds no
// table-sized gradient, the head keeps no copy of its input (the final norm's output, 4·32 B/token
// of the tiny model's 1,292: 4d + 4d + 8 of the norm, 4V + 4 of the loss), and ZeRO-1's all-gather
// sends the 25,984 trainable parameters' shard.
TEST(StepPeak, AFrozenTableHoldsNoGradient) {
  MemoryLayout l = layout_of("tiny", 2, 1);
  l.micro_batch = 32;
  l.frozen = {"wte.weight"};
  const ParameterCounts c = with_module_plan(parameter_counts(l.model), l);
  for (const StepMoment& m : step_moments(l, c, pipeline_stages(l).front())) {
    EXPECT_NE(m.name, "the embeddings' backward");
    EXPECT_EQ(term_bytes(m.terms, MemoryKind::Gradients), 0) << m.name;
    if (m.name == "the head's backward begins") {
      const auto head = std::find_if(m.terms.begin(), m.terms.end(), [](const MemoryTerm& t) { return t.name == "activations: final norm and loss"; });
      ASSERT_NE(head, m.terms.end());
      EXPECT_EQ(head->bytes, (1292.0 - 128) * 512);
    }
    if (m.name == "the optimizer step") {
      EXPECT_EQ(m.bytes(), 4.0 * 12992);  // ceil(25,984 / 2)
    }
  }
}

// The tests' small vision-language model (tests/train/vlm_jsonl_job.h): an encoder of 2 GPT-2-kind
// blocks, d 32, 2 heads, over 2 x 2-pixel RGB patches, grids up to 8 a side merged 2 x 2; 4 samples a
// micro-batch, each image at most 8 x 8 = 64 patches, N = 256 patches, 64 image tokens.
MemoryLayout tiny_vlm_layout(int dp = 1, int stage = 0, int compute_bytes = 4) {
  MemoryLayout l = layout_of("vlm-ocr", dp, stage, compute_bytes);
  l.model.n_layer = 2, l.model.d_model = 32, l.model.n_head = 4, l.model.n_kv_head = 2, l.model.seq_len = 32;
  l.model.vision.n_layer = 2, l.model.vision.n_head = 2, l.model.vision.d_model = 32, l.model.vision.patch_size = 2;
  l.model.vision.max_grid = 8;
  l.micro_batch = 4;
  l.max_image_patches = 64;
  return l;
}

// The tiny VLM by hand.
TEST(VisionMemory, TinyVisionLanguageModelTermByTerm) {
  MemoryLayout l = tiny_vlm_layout();
  const ParameterCounts trained = with_module_plan(parameter_counts(l.model), l);
  EXPECT_EQ(trained.total, l.model.parameter_count());
  EXPECT_FALSE(trained.vision_frozen);
  EXPECT_EQ(vision_patches_per_micro_batch(l), 256);
  const std::vector<MemoryTerm> saved = vision_saved_terms(l, trained);
  ASSERT_EQ(saved.size(), 3u);
  // Per patch and block 4(16d + a + 4) = 2072 B (GPT-2 in fp32), two blocks.
  EXPECT_EQ(saved[0].bytes, 2 * 2072.0 * 256);
  // The positions' indices 16, the final norm's input 4·32 and statistics 8, the merge's index 8.
  EXPECT_EQ(saved[1].bytes, (16 + 128 + 8 + 8) * 256.0);
  // fc1's input 4·32 per patch, GELU's and fc2's inputs 2 × 4·32 per image token, the mask 1 B per LLM token.
  EXPECT_EQ(saved[2].bytes, 4 * 32 * 256.0 + 8 * 32 * 64 + 4 * 32);
  EXPECT_EQ(vision_batch_term(l).bytes, 4 * 12 * 256.0 + 16 * 4);

  l.frozen.clear();
  for (const ParameterShape& s : parameter_shapes(l.model))
    if (s.name.rfind("vision.", 0) == 0) l.frozen.push_back(s.name);
  const ParameterCounts frozen = with_module_plan(parameter_counts(l.model), l);
  EXPECT_TRUE(frozen.vision_frozen);
  EXPECT_EQ(frozen.trainable(), trained.total - l.model.vision.parameter_count(32) + l.model.vision.connector_parameters(32));
  // The encoder runs forward only: the connector's inputs alone stay, and no vision backward moment.
  const std::vector<MemoryTerm> connector = vision_saved_terms(l, frozen);
  ASSERT_EQ(connector.size(), 1u);
  EXPECT_EQ(connector[0].bytes, saved[2].bytes);
  EXPECT_TRUE(vision_block_backward_terms(l, frozen).empty());
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  // Under ZeRO-3 in bf16 the frozen encoder's matmul weights keep their 16-bit working copies, in no
  // unit: the patch embedding's 32 × 12 and two blocks' 4 · 32² + 2 · 32 · 128.
  EXPECT_EQ(frozen.vision_frozen_matmul, 32 * 12 + 2 * (4 * 32 * 32 + 2 * 32 * 128));
  l.zero_stage = 3, l.dp = l.dp_shard = 2, l.compute_bytes = 2;
  const std::vector<MemoryTerm> states = model_state_terms(l, frozen);
  ASSERT_TRUE(std::any_of(states.begin(), states.end(), [&](const MemoryTerm& t) {
    return t.name == "parameters, 16-bit working copies of the frozen vision encoder's matmul weights" && t.bytes == 2.0 * 24960;
  }));
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  l.zero_stage = 0, l.dp = l.dp_shard = 1, l.compute_bytes = 4;
  l.frozen.pop_back();  // a part of the encoder trained
  EXPECT_FALSE(estimate_memory(l).covered());
}

// The same model in bf16: the blocks' count at e = 2, the patch embedding's input cast to bf16, the
// connector's inputs in bf16, and ZeRO-3's vision unit with its matmul weights in bf16. tp (with or
// without sp) and activation checkpointing leave the vision side as it is: tp keeps it whole,
// checkpointing reaches the LLM's blocks alone.
TEST(VisionMemory, TinyVisionLanguageModelInBf16UnderTpAndCheckpointing) {
  MemoryLayout l = tiny_vlm_layout(2, 3, 2);
  const ParameterCounts c = with_module_plan(parameter_counts(l.model), l);
  const std::vector<MemoryTerm> saved = vision_saved_terms(l, c);
  ASSERT_EQ(saved.size(), 3u);
  // Per patch and block: the residual stream and norms 2·4·32 + 2·2·32 + 16, the projections' inputs
  // 2·2·32 + 2·2·32, the MLP's 2·2·128, the log-sum-exp 4·2: 1176 B.
  EXPECT_EQ(saved[0].bytes, 2 * 1176.0 * 256);
  // The positions' indices 16, the patches cast to bf16 2·12, the final norm's input 4·32 with its statistics 8, the merge's index 8.
  EXPECT_EQ(saved[1].bytes, (16 + 24 + 128 + 8 + 8) * 256.0);
  // fc1's input 2·32 per patch, GELU's and fc2's inputs 2 × 2·32 per image token, the mask 1 B per LLM token.
  EXPECT_EQ(saved[2].bytes, 2 * 32 * 256.0 + 4 * 32 * 64 + 4 * 32);
  const std::vector<MemoryTerm> backward = vision_block_backward_terms(l, c);
  EXPECT_EQ(backward.back().bytes, 4 * 256.0 * 32 + 4 * 256.0 * 128 + 2 * 128.0 * 32);
  const double matmul = 4 * 32 * 32 + 2 * 32 * 128;
  EXPECT_EQ(vision_block_unit_bytes(l), 2 * matmul + 4 * (double(l.model.vision.block_parameters()) - matmul));
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;

  l.dp = l.dp_shard = 1, l.tp = 2, l.zero_stage = 0;
  l.activation_checkpointing = ActivationCheckpointing::parse("full");
  const std::vector<MemoryTerm> under_tp = vision_saved_terms(l, c);
  ASSERT_EQ(under_tp.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) EXPECT_EQ(under_tp[i].bytes, saved[i].bytes) << saved[i].name;
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  l.sequence_parallel = true;
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  // The whole encoder frozen under tp is modelled (tp keeps it whole); the connector frozen is not.
  for (const ParameterShape& s : parameter_shapes(l.model))
    if (s.name.rfind("vision.", 0) == 0) l.frozen.push_back(s.name);
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
  l.frozen.push_back("connector.fc1.weight");
  EXPECT_FALSE(estimate_memory(l).covered());
}

// Korthikanti et al. count 34·h bytes per token and layer at 2-byte elements besides the attention
// scores; without its dropout masks (2h) that is 16h elements, which dtrain keeps in fp32, plus one
// log-sum-exp per head and LayerNorm's mean and rstd twice.
TEST(Activations, GptTwoBlockIsThePapersCountWithoutMasksInFp32) {
  MemoryLayout l = layout_of("gpt2-124m");
  EXPECT_EQ(block_bytes_per_token(l), (34 - 2) * 768 * 2 + 4 * 12 + 4 * 4);
  EXPECT_EQ(selective_block_bytes_per_token(l), (34 - 2) * 768 * 2 + 4 * 4);  // the log-sum-exp goes
  EXPECT_EQ(checkpointed_block_bytes_per_token(l), 4 * 768);
  // The head: the final norm's input and output, the log-softmax over 50,257 tokens, three statistics.
  EXPECT_EQ(head_bytes_per_token(l), 4 * 768 + 4 * 768 + 4 * 50257 + 4 * 3);
  l.compute_bytes = 2;  // bf16: the residual stream stays fp32, the rest is 16-bit
  EXPECT_EQ(block_bytes_per_token(l), 8 * 768 + 8 * 768 + 4 * 768 + 4 * 3072 + 4 * 12 + 16);
  EXPECT_EQ(head_bytes_per_token(l), 4 * 768 + 2 * 768 + 2 * 50257 + 12);
}

// Llama 1B: d 2048, 8 KV heads of 64 (kv 512), SwiGLU 8192, 32 heads.
TEST(Activations, LlamaBlockCountsSwiGluAndGroupedKv) {
  MemoryLayout l = layout_of("llama-1b");
  // Whole: both fp32 residuals and both norms' outputs; q, the kernel's output and the o projection's
  // input; k and v; gate, up, their product and silu(gate).
  EXPECT_EQ(block_bytes_per_token(l), 16 * 2048 + 12 * 2048 + 8 * 512 + 16 * 8192 + 4 * 32 + 8);
  EXPECT_EQ(selective_block_bytes_per_token(l), block_bytes_per_token(l) - 4 * 32 - 4 * 2048);
  l.compute_bytes = 2;
  EXPECT_EQ(block_bytes_per_token(l), 12 * 2048 + 4 * 2048 + 4 * 512 + 8 * 8192 + 4 * 32 + 8);
  // RoPE's fp32 q and k saved by the checkpoint in place of their 16-bit copies.
  EXPECT_EQ(selective_block_bytes_per_token(l), block_bytes_per_token(l) - 4 * 32 + 2 * (2048 + 512));
  // Under tp 2 the residuals and norms stay whole; the heads (16, 4 of them KV), q's three tensors
  // and the MLP halve (the demo model's Llama measured 3.0% over when the split part held a residual).
  l.compute_bytes = 4, l.tp = 2;
  EXPECT_EQ(block_bytes_per_token(l), 16 * 2048 + 12 * 2048 / 2 + 8 * 256 + 16 * 4096 + 4 * 16 + 8);
  l.sequence_parallel = true;
  EXPECT_EQ(block_bytes_per_token(l), (16 * 2048 + 8) / 2 + 12 * 2048 / 2 + 8 * 256 + 16 * 4096 + 4 * 16);
}

// The tiny model on one rank, fp32, 8 sequences of 16 tokens (T = 128): its peak is when the head's
// backward begins, every activation still saved and the logits' gradient beside them. The counting
// allocator measures 1,375,760 bytes (16 of them scalars outside the estimate).
TEST(MemoryEstimate, TinyModelTermByTerm) {
  MemoryLayout l = layout_of("tiny");
  l.micro_batch = 8;
  const MemoryEstimate e = estimate_memory(l);
  ASSERT_TRUE(e.covered()) << e.no_estimate;
  const RankEstimate& r = e.most_loaded();
  EXPECT_EQ(r.peak_moment, "the head's backward begins");
  const double states = 34176.0 * 16, blocks = 2 * (4 * (16 * 32 + 2 + 4)) * 128.0, head = 4 * (2 * 32 + 256 + 3) * 128.0;
  const double logits_gradient = 4 * 128.0 * 256, batch = 16 * 128.0;
  EXPECT_EQ(r.tensor_bytes(), states + blocks + head + logits_gradient + batch);
  EXPECT_NEAR(r.tensor_bytes(), 1375760, 16);
  EXPECT_GT(r.device_bytes(), r.tensor_bytes());  // the runtime comes on top
}

// contiguous_memory_optimization's buffer holds number_checkpoints slots whatever is held: with a
// slot per checkpointed input the peak is that of the inputs kept one by one, each spare slot adds
// one piece (4d/tp bytes a token, partitioned over tp 2), and at the optimizer step, with no input
// held, the whole buffer is there.
TEST(StepPeak, TheContiguousCheckpointBufferAddsItsFreeSlots) {
  MemoryLayout l = layout_of("tiny");
  l.tp = 2;
  l.micro_batch = 8;
  l.activation_checkpointing = ActivationCheckpointing::parse("full");
  l.activation_checkpointing.store.partition = true;
  const double separate = estimate_memory(l).most_loaded().tensor_bytes();
  l.activation_checkpointing.store.contiguous = true;
  l.activation_checkpointing.store.slots = 2;
  EXPECT_EQ(estimate_memory(l).most_loaded().tensor_bytes(), separate);
  l.activation_checkpointing.store.slots = 5;
  const RankEstimate spare = estimate_memory(l).most_loaded();
  const double piece = 4.0 * 32 / 2 * 128;
  EXPECT_EQ(spare.tensor_bytes(), separate + 3 * piece);
  const std::vector<StepMoment> moments = step_moments(l, parameter_counts(l.model, l.tp), pipeline_stages(l).front());
  EXPECT_EQ(term_bytes(moments.back().terms, MemoryKind::Activations), 5 * piece) << moments.back().name;
}

// 16-bit gradient accumulation under DDP: every bucket's bf16 copy (2 bytes a trainable parameter) is
// alive at backward's end, before the copies go back into the fp32 gradient; during backward, those
// of the whole buckets computed so far. ZeRO-2 sends no such copies.
TEST(StepPeak, SixteenBitGradientAccumulationHoldsTheBucketsCopies) {
  MemoryLayout l = layout_of("tiny", 2, 0, 2);
  l.grad_accum_16bit = true;
  const ParameterCounts counts = parameter_counts(l.model, l.tp);
  std::vector<StepMoment> moments = step_moments(l, counts, pipeline_stages(l).front());
  const auto at_end = std::find_if(moments.begin(), moments.end(), [](const StepMoment& m) { return m.name.rfind("backward's end", 0) == 0; });
  ASSERT_NE(at_end, moments.end());
  EXPECT_EQ(term_bytes(at_end->terms, MemoryKind::Communication), 2.0 * counts.trainable());
  l.reduce_bucket_elements = counts.head / 3;  // the head's gradients (its final norm: the table is tied) fill three buckets
  moments = step_moments(l, counts, pipeline_stages(l).front());
  const auto last_block = std::find_if(moments.begin(), moments.end(), [](const StepMoment& m) { return m.name == "the last block's backward"; });
  ASSERT_NE(last_block, moments.end());
  EXPECT_EQ(term_bytes(last_block->terms, MemoryKind::Communication), 2.0 * 3 * l.reduce_bucket_elements);
  l.zero_stage = 2;
  moments = step_moments(l, counts, pipeline_stages(l).front());
  EXPECT_TRUE(std::none_of(moments.begin(), moments.end(), [](const StepMoment& m) { return m.name.rfind("backward's end", 0) == 0; }));
}

// 16-bit compute whose GEMMs widen their operands (no native GEMM on this device) is refused by name:
// its blocks' fp32 copies are not modelled.
TEST(MemoryEstimate, SixteenBitWithoutNativeGemmsIsRefused) {
  MemoryLayout l = layout_of("tiny", 2, 0, 2);
  ASSERT_TRUE(estimate_memory(l).covered());
  l.native_gemm = false;
  EXPECT_EQ(estimate_memory(l).no_estimate,
            "no estimate for 16-bit compute without native 16-bit GEMMs on this device (bf16 needs AVX512-BF16, fp16 AVX512-FP16 on a CPU)");
}

// ZeRO-3 with a tied table cut into row blocks: the loss's backward (its saved logits, e·T·V, and
// the logits' gradient) and then the head's row loop, where the saved logits are gone and the
// gradient's columns of a block are copied contiguous beside the summed input gradient. GPT-2 124M,
// 256 tokens, 2 ranks: 6 blocks of ceil(50257 / 6) = 8377 rows of 768.
TEST(StepPeak, TableInRowsSeparatesTheLossFromTheHeadsRowLoop) {
  MemoryLayout l = layout_of("gpt2-124m", 2, 3);
  l.model.seq_len = 256;
  const ParameterCounts c = parameter_counts(l.model);
  std::vector<StepMoment> moments = step_moments(l, c, pipeline_stages(l).front());
  const auto named = [&](const std::string& name) {
    return *std::find_if(moments.begin(), moments.end(), [&](const StepMoment& m) { return m.name == name; });
  };
  const StepMoment loss = named("the loss's backward"), rows = named("the head's backward, a block of the table's rows at a time");
  const double T = 256, V = 50257, d = 768, row_block = 4 * 8377 * d;
  const double saved_logits = (4 * V + 4) * T, row_loop = 3 * row_block + 4 * T * 8377 + 4 * T * d;
  EXPECT_NEAR(rows.bytes() - loss.bytes(), row_loop - saved_logits, 1);
}

// Tensor parallelism over 2 ranks on the tiny GPT-2 (d 32, 2 heads of 16, d_ff 128, V 256): each
// rank holds half of every matmul weight, of q's, k's, v's and up's biases and of the table; o's and
// down's biases, the norms and the position table whole.
TEST(ParameterCounts, TensorParallelRanksHoldTheirSlices) {
  const ParameterCounts c = parameter_counts(model_preset("tiny"), 2);
  EXPECT_EQ(c.block_matmul, (3072 + 1024 + 8192) / 2);
  EXPECT_EQ(c.block, 6144 + 16 + 2 * 16 + 32 + 64 + 32 + 4 * 32);
  EXPECT_EQ(c.table, 128 * 32);
  EXPECT_EQ(c.embeddings, 128 * 32 + 16 * 32);
  EXPECT_EQ(c.total, 2 * 6448 + 4608 + 64);
  // One key/value head shared by 2 tp ranks: both keep its weights whole.
  TransformerConfig gqa = model_preset("tiny");
  gqa.arch = "llama", gqa.n_kv_head = 1;
  EXPECT_EQ(parameter_counts(gqa, 2).block_matmul, 32 * 16 + 2 * 32 * 16 + 16 * 32 + 3 * 32 * 64);
}

// Korthikanti et al.'s factors on the tiny GPT-2 in fp32: a block keeps 2,072 bytes per token
// (8d + 16d + 8·kv + 8f + 4a + 16), of which tp leaves 528 whole on each rank (the residual stream's
// 8d, the norms' outputs 8d and statistics 16: the paper's "10") and splits the rest, 1,544, in
// half: 1,300. Sequence parallelism splits the whole part too: 2,072 / 2.
TEST(ActivationMemory, TensorAndSequenceParallelismSplitWhatThePaperSays) {
  MemoryLayout l = layout_of("tiny");
  EXPECT_EQ(block_bytes_per_token(l), 2072);
  l.tp = 2;
  EXPECT_EQ(block_bytes_per_token(l), 528 + 1544 / 2);
  EXPECT_EQ(checkpointed_block_bytes_per_token(l), 4 * 32);
  // The head: the final norm's input, output and statistics whole; the vocab-parallel loss's fp32
  // softmax over 128 rows and 13 bytes of target bookkeeping.
  EXPECT_EQ(head_bytes_per_token(l), 4 * 32 + 4 * 32 + 8 + 4 * 128 + 13);
  EXPECT_EQ(logits_gradient_bytes_per_token(l), 4 * 128);
  l.activation_checkpointing.store.partition = true;
  EXPECT_EQ(checkpointed_block_bytes_per_token(l), 4 * 32 / 2);
  l.sequence_parallel = true;
  EXPECT_EQ(block_bytes_per_token(l), 2072 / 2);
  EXPECT_EQ(checkpointed_block_bytes_per_token(l), 4 * 32 / 2);  // already the rank's half: nothing more to partition
  l.compute_bytes = 2;
  EXPECT_EQ(logits_gradient_bytes_per_token(l), (4 + 2) * 128);  // the fp32 gradient and its bf16 copy
}

// Context parallelism over 2 ranks: each keeps half of every sequence's tokens, and its attention
// saves its own output beside the o projection's input (4d more per token in fp32: 2,072 + 128),
// which selective recomputation drops with the log-sum-exp.
TEST(ActivationMemory, ContextParallelismHalvesTheTokensAndKeepsTheAttentionOutput) {
  MemoryLayout l = layout_of("tiny");
  l.micro_batch = 8, l.cp = 2;
  EXPECT_EQ(tokens_per_micro_batch(l), 8 * 16 / 2);
  EXPECT_EQ(block_bytes_per_token(l), 2072 + 4 * 32);
  EXPECT_EQ(selective_block_bytes_per_token(l), 2072 - 4 * 2);
}

// The schedules' micro-batches in flight at pp 2 with 4 micro-batches: GPipe runs every forward
// before any backward (4 on each stage); 1F1B holds pp - stage (2, then 1). Blocks split evenly, the
// embeddings on the first stage, the head and the tied table's copy on the last.
TEST(PipelineStages, InFlightMicroBatchesFollowTheSchedule) {
  MemoryLayout l = layout_of("tiny");
  l.pp = 2, l.accumulation = 4;
  for (const auto& [kind, first, last] : {std::tuple{ScheduleKind::OneFOneB, 2, 1}, std::tuple{ScheduleKind::GPipe, 4, 4}}) {
    l.schedule = kind;
    const std::vector<PipelineStage> stages = pipeline_stages(l);
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages[0].in_flight, first) << schedule_name(kind);
    EXPECT_EQ(stages[1].in_flight, last) << schedule_name(kind);
    EXPECT_EQ(stages[0].blocks + stages[1].blocks, 2);
    EXPECT_TRUE(stages[0].first && !stages[0].last && stages[1].last && !stages[1].first);
  }
  const ParameterCounts whole = parameter_counts(l.model);
  const std::vector<PipelineStage> stages = pipeline_stages(l);
  const ParameterCounts first = stage_parameter_counts(whole, l.model, stages[0]), last = stage_parameter_counts(whole, l.model, stages[1]);
  EXPECT_EQ(first.total, whole.block + whole.embeddings);
  EXPECT_EQ(last.total, whole.block + whole.head + whole.table);
  EXPECT_EQ(first.total + last.total, whole.total + whole.table);  // the tied table twice
}

// 1F1B's first stage at its third backward on the tiny GPT-2 in fp32, 4 micro-batches of 32
// sequences (T = 512), DDP: its one block and the embeddings (16 bytes of state per parameter), its
// block's activations for the micro-batch it runs and for the other one in flight, the outputs it
// sent for both (each alive until its backward has run) and the gradient it reads beside the next
// one, posted a compute ahead (4 × 4·T·d; 6 while every receive was posted at the step's start and
// every send held to its end), the step's tokens and targets, and the block's gradient working set.
// The counting allocator measures it within 8 bytes.
TEST(MemoryEstimate, PipelineStageTermByTerm) {
  MemoryLayout l = layout_of("tiny");
  l.pp = 2, l.accumulation = 4, l.micro_batch = 32;
  const MemoryEstimate e = estimate_memory(l);
  ASSERT_TRUE(e.covered()) << e.no_estimate;
  ASSERT_EQ(e.ranks.size(), 2u);
  const RankEstimate& first = e.of_stage(0);
  EXPECT_EQ(first.peak_moment, "the last block's backward");
  const double T = 512, d = 32, f = 128;
  const double states = 16.0 * (12704 + 8704), block = 2072 * T;
  const double boundary = 4 * 4 * T * d, tokens = 4 * 16 * T, working_set = 4 * T * d + 4 * T * f + 4 * f * d;
  EXPECT_EQ(first.tensor_bytes(), states + 2 * block + boundary + tokens + working_set);
  EXPECT_EQ(e.of_stage(1).stage, 1);
  EXPECT_EQ(e.of_stage(1).peak_moment, "the head's backward begins");
}

// Interleaved 1F1B at pp 2 with 2 chunks per rank, 4 micro-batches, the tiny GPT-2 with 4 blocks (one
// a chunk): rank 0 holds chunks 0 and 2. Its schedule runs F(0,0) F(1,0) F(0,2) F(1,2) F(2,0), then
// B(0,2), F(3,0): five (micro-batch, chunk) pairs of one block each are held at its second backward,
// when 8 boundary buffers are alive: the sends the schedule does not yet show read (or whose output a
// backward still starts from) and the receives posted a compute ahead and not yet read (16 while
// every receive was posted at the step's start and every send held to its end). The counting
// allocator measures it within 8 bytes.
TEST(MemoryEstimate, InterleavedStageCountsPairsAndBuffersFromTheSchedule) {
  MemoryLayout l = layout_of("tiny");
  l.model.n_layer = 4;
  l.pp = 2, l.virtual_stages = 2, l.accumulation = 4, l.micro_batch = 32, l.schedule = ScheduleKind::Interleaved1F1B;
  const std::vector<PipelineStage> stages = pipeline_stages(l);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].in_flight, 5);
  EXPECT_EQ(stages[1].in_flight, 3);
  ASSERT_EQ(stages[0].chunks.size(), 2u);
  EXPECT_EQ(stages[0].model_block(1), 2);  // chunk 2's block
  EXPECT_EQ(stages[1].model_block(1), 3);
  const MemoryEstimate e = estimate_memory(l);
  ASSERT_TRUE(e.covered()) << e.no_estimate;
  const double T = 512, d = 32, f = 128;
  const double states = 16.0 * (2 * 12704 + 8704), pairs = 5 * 2072 * T;
  const double boundary = 8 * 4 * T * d, tokens = 4 * 16 * T, working_set = 4 * T * d + 4 * T * f + 4 * f * d;
  EXPECT_EQ(e.of_stage(0).tensor_bytes(), states + pairs + boundary + tokens + working_set);
}

// ZeRO-3 under pp holds every unit of the stage and its whole gradients through the step, 8Ψ_stage
// in fp32 over the shards: at dp 1 the stage takes 8Ψ more than under DDP (16Ψ either way besides).
TEST(MemoryEstimate, PipelineZero3HoldsUnitsAndGradientsWhole) {
  MemoryLayout l = layout_of("tiny");
  l.pp = 2, l.accumulation = 4, l.micro_batch = 32;
  const MemoryEstimate ddp = estimate_memory(l);
  l.zero_stage = 3;
  const MemoryEstimate zero3 = estimate_memory(l);
  ASSERT_TRUE(zero3.covered()) << zero3.no_estimate;
  EXPECT_EQ(zero3.of_stage(0).tensor_bytes(), ddp.of_stage(0).tensor_bytes() + 8.0 * (12704 + 8704));
  EXPECT_EQ(zero3.of_stage(1).tensor_bytes(), ddp.of_stage(1).tensor_bytes() + 8.0 * (12704 + 64 + 8192));
}

// With one micro-batch a step the stage's gradients appear as its backward goes: none at the head's
// backward, the head's (the final norm's 64 and the tied table's copy, 8,192) at the last block's.
// The tiny model's last stage at T = 512 tokens, at its last block's backward: the same terms as
// with DDP besides the shards' 16Ψ_stage, the held units' 4Ψ_stage and those 4 × 8,256 bytes.
TEST(MemoryEstimate, PipelineZero3WithOneMicroBatchHoldsTheGradientsComputed) {
  MemoryLayout l = layout_of("tiny");
  l.pp = 2, l.accumulation = 1, l.micro_batch = 32;
  const PipelineStage last = pipeline_stages(l).back();
  const ParameterCounts c = stage_parameter_counts(parameter_counts(l.model, 1), l.model, last);
  const std::vector<StepMoment> ddp = step_moments(l, c, last);
  l.zero_stage = 3;
  const std::vector<StepMoment> zero3 = step_moments(l, c, last);
  ASSERT_EQ(zero3[0].name, "the head's backward begins");
  ASSERT_EQ(zero3[1].name, "the last block's backward");
  const double units = 4.0 * (12704 + 64 + 8192);
  EXPECT_EQ(zero3[0].bytes(), ddp[0].bytes() + units);
  EXPECT_EQ(zero3[1].bytes(), ddp[1].bytes() + units + 4.0 * (64 + 8192));
}

// Under bf16 a pipelined ZeRO-3 stage holds each block's unit as gathered: the matmul weights
// (12d² = 12,288 of the tiny model's 12,704) in 2 bytes, the rest in 4; the embeddings in fp32 with
// the tied table's rounded copy (2 × 8,192), the head (the final norm and the table's copy) in fp32.
// The gradients stay fp32: 4Ψ_stage.
TEST(MemoryEstimate, PipelineZero3UnderBf16HoldsUnitsAsGathered) {
  MemoryLayout l = layout_of("tiny", 1, 3, 2);
  l.pp = 2, l.accumulation = 4, l.micro_batch = 32;
  const MemoryEstimate e = estimate_memory(l);
  ASSERT_TRUE(e.covered()) << e.no_estimate;
  const auto bytes_of = [](const RankEstimate& r, const std::string& name) {
    for (const MemoryTerm& t : r.terms)
      if (t.name.rfind(name, 0) == 0) return t.bytes;
    return -1.0;
  };
  const double block_unit = 2.0 * 12288 + 4.0 * (12704 - 12288);
  EXPECT_EQ(bytes_of(e.of_stage(0), "ZeRO-3 units of the stage"), block_unit + 4.0 * 8704 + 2.0 * 8192);
  EXPECT_EQ(bytes_of(e.of_stage(1), "ZeRO-3 units of the stage"), block_unit + 4.0 * (64 + 8192));
  EXPECT_EQ(bytes_of(e.of_stage(0), "gradients: autograd's, whole"), 4.0 * (12704 + 8704));
  EXPECT_EQ(bytes_of(e.of_stage(1), "gradients: autograd's, whole"), 4.0 * (12704 + 64 + 8192));
}

// zero_bubble at pp 2, 4 micro-batches: the last stage's busiest I (of micro-batch 1) comes before
// the W of micro-batch 0, whose I left per token, on the tiny GPT-2 (d 32, f 128, V 256): its block's
// linear inputs and output gradients 4·(8d + 2f) = 2,048 and the head's 4·(d + V) = 1,152 (stored
// detached: the received input they came from is not held for them); Llama's block (kv 16, f 128)
// 4·(6d + 2·kv + 3f) = 2,432. T = 512 tokens.
TEST(MemoryEstimate, ZeroBubbleHoldsWhatEachIsLeavesToItsW) {
  for (const bool llama : {false, true}) {
    MemoryLayout l = layout_of("tiny");
    if (llama) l.model.arch = "llama", l.model.n_kv_head = 1;
    l.pp = 2, l.accumulation = 4, l.micro_batch = 32, l.schedule = ScheduleKind::ZeroBubble;
    const std::vector<PipelineStage> stages = pipeline_stages(l);
    std::vector<int> stored;
    for (const PipelineMoment& m : stages[1].moments) stored.push_back(m.stored[0]);
    EXPECT_EQ(stored, (std::vector<int>{0, 1, 1, 1}));
    const MemoryEstimate e = estimate_memory(l);
    ASSERT_TRUE(e.covered()) << e.no_estimate;
    double bytes = -1;
    for (const MemoryTerm& t : e.of_stage(1).terms)
      if (t.name.rfind("zero_bubble: what the I of micro-batches", 0) == 0) bytes = t.bytes;
    EXPECT_EQ(bytes, ((llama ? 2432 : 2048) + 1152) * 512.0) << (llama ? "llama" : "gpt2");
  }
}

// Under sequence parallelism a stage hands on its tp rank's half of the sequence: the tiny model's
// 1F1B boundary tensors at pp 2, 4 micro-batches of 32 × 16 tokens (stage 0 at its busiest: two
// activations sent, the gradient it reads and the next; stage 1: the activation it reads and the
// next), each 4·T·d/2 = 32 KiB. On the
// demo model (d 192, V 256) the last stage peaks in the head's sequence-parallel backward, the final
// norm's tensors still saved: its input and output (fp32) and LayerNorm's two statistics on the
// rank's 512 of 8 × 128 tokens.
TEST(MemoryEstimate, SequenceParallelStagesHandOnTheirShareOfTheSequence) {
  MemoryLayout l = layout_of("tiny");
  l.pp = 2, l.tp = 2, l.sequence_parallel = true, l.accumulation = 4, l.micro_batch = 32;
  const MemoryEstimate e = estimate_memory(l);
  ASSERT_TRUE(e.covered()) << e.no_estimate;
  auto boundary = [](const RankEstimate& r) {
    return bytes_of(r.terms, [](const MemoryTerm& t) { return t.name.rfind("pipeline boundary buffers", 0) == 0; });
  };
  EXPECT_EQ(boundary(e.of_stage(0)), 4 * 4 * 512 * 32 / 2.0);
  EXPECT_EQ(boundary(e.of_stage(1)), 2 * 4 * 512 * 32 / 2.0);
  l.model = model_preset("demo"), l.micro_batch = 8;
  const RankEstimate last = estimate_memory(l).of_stage(1);
  EXPECT_EQ(last.peak_moment.rfind("the head's backward (sequence-parallel", 0), 0u) << last.peak_moment;
  EXPECT_EQ(bytes_of(last.terms, [](const MemoryTerm& t) { return t.name == "activations: final norm"; }), (4 * 192 + 4 * 192 + 8) * 512.0);
}

// Under tp 2 only the row-parallel layers defer: per token the o projection's input (d/2) and the
// down projection's (f/2), and both output gradients whole (2d), under sp too: 4·(2·32 + 16 + 64) =
// 576 for GPT-2 and Llama alike; the vocab-parallel head leaves nothing.
TEST(MemoryEstimate, ZeroBubbleUnderTpHoldsTheRowParallelLayersStores) {
  for (const bool llama : {false, true}) {
    for (const bool sp : {false, true}) {
      MemoryLayout l = layout_of("tiny");
      if (llama) l.model.arch = "llama", l.model.n_kv_head = 1;
      l.pp = 2, l.tp = 2, l.sequence_parallel = sp, l.accumulation = 4, l.micro_batch = 32, l.schedule = ScheduleKind::ZeroBubble;
      const MemoryEstimate e = estimate_memory(l);
      ASSERT_TRUE(e.covered()) << e.no_estimate;
      double bytes = -1;
      for (const MemoryTerm& t : e.of_stage(1).terms)
        if (t.name.rfind("zero_bubble: what the I of micro-batches", 0) == 0) bytes = t.bytes;
      EXPECT_EQ(bytes, 576 * 512.0) << (llama ? "llama" : "gpt2") << (sp ? " sp" : "");
    }
  }
}

// A micro-batch's I leaves each block's stores as it goes down the stage, so its first block's
// backward holds those of every block after it (with the blocks recomputed whole, where the saved
// activations no longer outweigh them, that moment is the stage's peak: measured +36% over without it).
TEST(StepPeak, ZeroBubbleStoresGrowDownTheStage) {
  MemoryLayout l = layout_of("tiny");
  l.model.n_layer = 6;
  l.pp = 2, l.accumulation = 4, l.micro_batch = 32, l.schedule = ScheduleKind::ZeroBubble;
  const PipelineStage stage = pipeline_stages(l).front();
  const std::vector<StepMoment> moments = step_moments(l, stage_parameter_counts(parameter_counts(l.model, 1), l.model, stage), stage);
  const auto first = std::find_if(moments.begin(), moments.end(), [](const StepMoment& m) { return m.name == "the first block's backward"; });
  ASSERT_NE(first, moments.end());
  double stores = -1;
  for (const MemoryTerm& t : first->terms)
    if (t.name == "zero_bubble: what this micro-batch's I has left to its W so far") stores = t.bytes;
  EXPECT_EQ(stores, 2 * 2048 * 512.0);  // blocks 1 and 2 of the stage's three: e·(6d + 2kv + 2f) = 2,048 B/token each
}

// At pp 2 with two micro-batches stage 0's first backward holds both, before any gradient exists,
// and its second one and all the stage's gradients: under ZeRO-3 the busiest is whichever is larger.
// The tiny model's stage 0 (1 block, the embeddings: 21,408 parameters) at 32 sequences: the first,
// by 2,072 B/token × 512 tokens of activations against 4 × 21,408 bytes of gradients.
TEST(MemoryEstimate, PipelineZero3GradientsExistFromAChunksSecondBackward) {
  MemoryLayout l = layout_of("tiny", 1, 3);
  l.pp = 2, l.accumulation = 2, l.micro_batch = 32;
  const PipelineStage first = pipeline_stages(l).front();
  ASSERT_EQ(first.moments.size(), size_t(2));
  EXPECT_EQ(first.moments[0].backwards_done, std::vector<int>{0});
  EXPECT_EQ(first.moments[1].backwards_done, std::vector<int>{1});
  const MemoryEstimate e = estimate_memory(l);
  for (const MemoryTerm& t : e.of_stage(0).terms) EXPECT_EQ(t.name.rfind("gradients: autograd's", 0), std::string::npos) << t.name;
  l.micro_batch = 1;  // 16 tokens: the gradients outweigh a micro-batch's activations
  const MemoryEstimate small = estimate_memory(l);
  double gradients = -1;
  for (const MemoryTerm& t : small.of_stage(0).terms)
    if (t.name.rfind("gradients: autograd's", 0) == 0) gradients = t.bytes;
  EXPECT_EQ(gradients, 4.0 * (12704 + 8704));
}

// Under pp each stage counts the frozen and kept-whole parameters it holds: the tiny GPT-2's tied
// table on both ends, its position table on the first stage, block 0 on the first stage only.
TEST(MemoryEstimate, UnderPpEachStageCountsTheFrozenAndKeptWholeParametersItHolds) {
  MemoryLayout l = layout_of("tiny", 1, 1);
  l.pp = 2, l.accumulation = 2;
  l.frozen = {"wte.weight", "wpe.weight"};
  for (const std::string& name : parameter_names(l.model))
    if (name.rfind("blocks.0.", 0) == 0) l.kept_whole.push_back(name);
  const std::vector<PipelineStage> stages = pipeline_stages(l);
  ASSERT_EQ(stages.size(), 2u);
  const TransformerConfig& m = l.model;
  const ParameterCounts whole = parameter_counts(m);
  const ParameterCounts first = with_module_plan(stage_parameter_counts(whole, m, stages[0]), l, stages[0]);
  const ParameterCounts last = with_module_plan(stage_parameter_counts(whole, m, stages[1]), l, stages[1]);
  EXPECT_EQ(first.frozen, int64_t(m.vocab_size) * m.d_model + int64_t(m.seq_len) * m.d_model);
  EXPECT_EQ(last.frozen, int64_t(m.vocab_size) * m.d_model);
  EXPECT_EQ(first.kept_whole, whole.block);
  EXPECT_EQ(last.kept_whole, 0);
  EXPECT_TRUE(estimate_memory(l).covered()) << estimate_memory(l).no_estimate;
}

TEST(MemoryEstimate, LayoutsWithoutFormulasAreRefusedByName) {
  struct Case {
    std::function<void(MemoryLayout&)> set;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{{[](MemoryLayout& l) {
                                            l.pp = 2, l.cp = 2, l.zero_stage = 1, l.accumulation = 2, l.schedule = ScheduleKind::ZeroBubble;
                                          },
                                          "no estimate for pp 2 with cp 2 under the zero_bubble schedule"},
                                         {[](MemoryLayout& l) {
                                            l.pp = 2, l.cp = 2, l.accumulation = 2;
                                            l.activation_checkpointing = ActivationCheckpointing::parse("selective");
                                          },
                                          "no estimate for pp 2 with cp 2 under selective activation checkpointing"},
                                         {[](MemoryLayout& l) { l.device_is_cpu = false, l.offload_param = "cpu"; },
                                          "no estimate for zero_optimization.offload_param.device=cpu without offload_optimizer on a GPU"},
                                         {[](MemoryLayout& l) { l.model = model_preset("vlm-ocr"), l.dp = l.dp_shard = 1, l.cp = 2; },
                                          "no estimate for a vision-language model (model.arch=vlm) under cp 2"},
                                         {[](MemoryLayout& l) { l.frozen = {"blocks.0.q_proj.weight"}; },
                                          "no estimate for frozen blocks.0.q_proj.weight (train.freeze, parallel.modules: only frozen "
                                          "embeddings, the blocks from the first frozen whole behind them and a whole frozen vision "
                                          "encoder are modelled)"},
                                         {[](MemoryLayout& l) { l.compute_bytes = 2, l.frozen = {"wte.weight"}; },
                                          "no estimate for frozen parameters other than a whole vision encoder under ZeRO stage 3 with bf16 or fp16"},
                                         {[](MemoryLayout& l) { l.unmodelled = {"data_types.grad_accum_dtype=\"bf16\""}; },
                                          "no estimate for data_types.grad_accum_dtype=\"bf16\""}}) {
    MemoryLayout l = layout_of("tiny", 2, 3);
    c.set(l);
    const MemoryEstimate e = estimate_memory(l);
    EXPECT_EQ(e.no_estimate, c.says);
    EXPECT_TRUE(e.ranks.empty());
  }
  MemoryLayout on_cpu = layout_of("tiny", 2, 3);
  on_cpu.offload_optimizer = "cpu";  // the CPU build's state already is in host memory: nothing moves
  EXPECT_TRUE(estimate_memory(on_cpu).covered());
}

// cpu_checkpointing on a GPU: the demo model's 4 checkpointed block inputs (4d B/token each) go to
// pinned host memory. At the peak (the last block's recomputation) the device holds the first
// block's input, which the forward still holds, and the recomputed block's copy: 2 inputs fewer than
// with them on the device, and every input on the host.
TEST(MemoryEstimate, CpuCheckpointingOnAGpuKeepsTheCheckpointedInputsOnTheHost) {
  MemoryLayout on_device = layout_of("demo", 1, 0);
  on_device.device_is_cpu = false, on_device.activation_checkpointing = ActivationCheckpointing::parse("full");
  MemoryLayout on_host = on_device;
  on_host.activation_checkpointing.store.host_memory = true;
  const MemoryEstimate device = estimate_memory(on_device), host = estimate_memory(on_host);
  ASSERT_TRUE(host.covered()) << host.no_estimate;
  ASSERT_EQ(on_device.model.n_layer, 4);
  const double input = 4.0 * on_device.model.d_model * tokens_per_micro_batch(on_device);
  EXPECT_EQ(device.most_loaded().bytes(MemoryPlace::Host), 0);
  EXPECT_EQ(host.most_loaded().bytes(MemoryPlace::Host), 4 * input);
  EXPECT_EQ(host.most_loaded().tensor_bytes(), device.most_loaded().tensor_bytes() - 2 * input);

  // With partition_activations under tp 2 the host holds each input's 1/tp piece; of the device's
  // two pieces (blocks 1 and 2) none is left, its two whole inputs (blocks 0 and 3) stay.
  MemoryLayout partitioned = on_device;
  partitioned.tp = 2, partitioned.activation_checkpointing.store.partition = true;
  MemoryLayout partitioned_on_host = partitioned;
  partitioned_on_host.activation_checkpointing.store.host_memory = true;
  const MemoryEstimate pieces = estimate_memory(partitioned), pieces_on_host = estimate_memory(partitioned_on_host);
  ASSERT_TRUE(pieces_on_host.covered()) << pieces_on_host.no_estimate;
  EXPECT_EQ(pieces_on_host.most_loaded().bytes(MemoryPlace::Host), 4 * input / 2);
  EXPECT_EQ(pieces_on_host.most_loaded().tensor_bytes(), pieces.most_loaded().tensor_bytes() - 2 * input / 2);
}

// Under pp the micro-batches in flight keep on the device only the inputs their stage received. The
// benchmark model (6 blocks, d 384, 8 × 256 tokens) at pp 2 under 1F1B with 4 micro-batches and full
// recomputation: stage 0 at its peak holds two micro-batches of 3 block inputs, and keeps the one in
// backward's first and recomputed ones (4 fewer); stage 1 one micro-batch, of which it keeps the
// received input and the recomputed copy (1 fewer). An H200 measured 12.0 and 4.8 MiB less.
TEST(MemoryEstimate, CpuCheckpointingOnAGpuUnderPpKeepsTheReceivedInputs) {
  MemoryLayout on_device = layout_of("demo", 1, 0);
  on_device.model.n_layer = 6, on_device.model.n_head = 6, on_device.model.d_model = 384, on_device.model.seq_len = 256;
  on_device.micro_batch = 8, on_device.pp = 2, on_device.accumulation = 4;
  on_device.device_is_cpu = false, on_device.activation_checkpointing = ActivationCheckpointing::parse("full");
  MemoryLayout on_host = on_device;
  on_host.activation_checkpointing.store.host_memory = true;
  const MemoryEstimate device = estimate_memory(on_device), host = estimate_memory(on_host);
  ASSERT_TRUE(host.covered()) << host.no_estimate;
  const double input = 4.0 * 384 * 8 * 256;
  EXPECT_EQ(host.of_stage(0).tensor_bytes(), device.of_stage(0).tensor_bytes() - 4 * input);
  EXPECT_EQ(host.of_stage(1).tensor_bytes(), device.of_stage(1).tensor_bytes() - 1 * input);
  EXPECT_EQ(host.of_stage(0).bytes(MemoryPlace::Host), 6 * input);
  EXPECT_EQ(host.of_stage(1).bytes(MemoryPlace::Host), 3 * input);
}

// ZeRO-Offload on a GPU (not measured: no GPU here), GPT-2 124M at dp 4 with AdamW, a shard of
// 31,109,952: the optimizer state (8 B an element) and its update go to the host, with pinned staging
// of the gradient shard (4 B) and of the parameters (4 B) unless the shard is offloaded too; the GPU
// keeps the parameters and the gradients.
TEST(ModelStates, OffloadToTheCpuOnAGpuMovesTheStatesToTheHost) {
  const ParameterCounts c = parameter_counts(model_preset("gpt2-124m"));
  const double psi = 124439808, shard = 31109952;
  MemoryLayout zero2 = layout_of("gpt2-124m", 4, 2);
  zero2.device_is_cpu = false;
  zero2.offload_optimizer = "cpu";
  const auto terms2 = model_state_terms(zero2, c);
  EXPECT_EQ(place_bytes(terms2, MemoryPlace::Device), 4 * psi + 4 * shard);
  EXPECT_EQ(place_bytes(terms2, MemoryPlace::Host), 8 * shard + 8 * shard);
  EXPECT_EQ(place_bytes(terms2, MemoryPlace::Nvme), 0);
  MemoryLayout zero3 = layout_of("gpt2-124m", 4, 3);
  zero3.device_is_cpu = false;
  zero3.offload_optimizer = zero3.offload_param = "cpu";
  const auto terms3 = model_state_terms(zero3, c);
  EXPECT_EQ(place_bytes(terms3, MemoryPlace::Device), 4 * shard);  // the gradient shard
  EXPECT_EQ(place_bytes(terms3, MemoryPlace::Host), 4 * shard + 8 * shard + 4 * shard);
  // The whole estimate adds nothing on the host: what a step gathers is copied to the GPU, piece by piece.
  const MemoryEstimate e = estimate_memory(zero3);
  ASSERT_TRUE(e.covered()) << e.no_estimate;
  EXPECT_EQ(e.most_loaded().bytes(MemoryPlace::Host), 16 * shard);
}

// ZeRO-Infinity on NVMe: the state and (stage 3) the parameter shard in files, streamed through
// three buffer sets of sub-groups of max(2^20, ceil(31,109,952 / 48)) = 1,048,576 elements, one per
// state tensor and one for the parameters. On the CPU build the buffers are in the memory the rank
// computes in; on a GPU, on the host beside the gradient staging.
TEST(ModelStates, NvmeOffloadKeepsItsStreamingBuffers) {
  const ParameterCounts c = parameter_counts(model_preset("gpt2-124m"));
  const double psi = 124439808, shard = 31109952, sub = 1048576;
  MemoryLayout l = layout_of("gpt2-124m", 4, 3);
  l.offload_optimizer = l.offload_param = "nvme";
  auto terms = model_state_terms(l, c);
  EXPECT_EQ(place_bytes(terms, MemoryPlace::Nvme), 4 * shard + 8 * shard);
  EXPECT_EQ(place_bytes(terms, MemoryPlace::Device), 4 * shard + 4 * 3 * 3 * sub);
  l.device_is_cpu = false;
  terms = model_state_terms(l, c);
  EXPECT_EQ(place_bytes(terms, MemoryPlace::Device), 4 * shard);
  EXPECT_EQ(place_bytes(terms, MemoryPlace::Host), 4 * 3 * 3 * sub + 4 * shard);
  // The optimizer alone at stage 2, with sub_group_size 10^7: ceil(shard / 10^7) = 4 sub-groups, 3 sets of 2 buffers.
  MemoryLayout zero2 = layout_of("gpt2-124m", 4, 2);
  zero2.offload_optimizer = "nvme";
  zero2.sub_group_size = 10000000;
  const auto terms2 = model_state_terms(zero2, c);
  EXPECT_EQ(place_bytes(terms2, MemoryPlace::Nvme), 8 * shard);
  EXPECT_EQ(place_bytes(terms2, MemoryPlace::Device), 4 * psi + 4 * shard + 4 * 3 * 2 * 1e7);
  // A state under one sub-group of 2^20 (the tiny model's) is one set as large as the state: nothing saved.
  MemoryLayout tiny = layout_of("tiny", 2, 2);
  tiny.offload_optimizer = "nvme";
  EXPECT_EQ(place_bytes(model_state_terms(tiny, parameter_counts(tiny.model)), MemoryPlace::Device), 4 * 34176.0 + 4 * 17088.0 + 8 * 17088.0);
}

// Every config key of the sections that decide what a rank holds is classified (modelled, of no
// effect, or refused when set): a new parallelism's keys fail this until the estimate says what
// they do, so none lands without its formula or an explicit "no estimate".
TEST(EstimateLayout, EveryLayoutKeyOfTheConfigIsClassified) {
  std::vector<std::string> config_keys;
  std::function<void(const nlohmann::json&, const std::string&)> collect = [&](const nlohmann::json& j, const std::string& prefix) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
      const bool in_section = std::any_of(layout_sections().begin(), layout_sections().end(), [&](const std::string& s) {
        return key == s || key.rfind(s + ".", 0) == 0;
      });
      if (in_section) config_keys.push_back(key);
      if (it.value().is_object() && !is_free_form(key)) collect(it.value(), key);
    }
  };
  collect(config_defaults(), "");
  std::vector<std::string> classified;
  for (const LayoutKey& k : layout_keys()) classified.push_back(k.key);
  std::sort(config_keys.begin(), config_keys.end());
  std::sort(classified.begin(), classified.end());
  std::vector<std::string> unclassified, unknown;
  std::set_difference(config_keys.begin(), config_keys.end(), classified.begin(), classified.end(), std::back_inserter(unclassified));
  std::set_difference(classified.begin(), classified.end(), config_keys.begin(), config_keys.end(), std::back_inserter(unknown));
  EXPECT_TRUE(unclassified.empty()) << "config keys the estimate does not classify (train/estimate_layout.cpp): " << ::testing::PrintToString(unclassified);
  EXPECT_TRUE(unknown.empty()) << "classified keys the config does not have: " << ::testing::PrintToString(unknown);
}

}  // namespace
}  // namespace dtrain

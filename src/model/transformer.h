// The decoder-only transformer both architectures share, or some chunks of it. Parameter names follow
// Hugging Face's GPT-2 and Llama where that is natural: wte, wpe (GPT-2), blocks.N.{ln1, q_proj,
// k_proj, v_proj, o_proj, ln2, gate_proj (Llama), up_proj, down_proj}, ln_f, lm_head (untied), each
// with .weight and, for GPT-2, .bias. A model may hold only some parts (a pipeline stage): the
// embeddings, chunks of consecutive blocks and the final norm with the head, each optional; blocks
// keep their global index in their names (blocks.N on any stage) and every parameter is initialised
// from (seed, name) alone, so a part holds the same weights in any model that holds it.
//
// A vision-language model (arch "vlm") is this transformer, whole, with a vision encoder
// (vision_encoder.h, parameters vision.*) and a connector (connector.h, connector.*) in front of it,
// and its own modules under "llm" (llm.wte, llm.blocks.N, llm.ln_f, llm.lm_head): one model type, so
// every parallelism, ZeRO's units, freezing and checkpoints address its three parts by name. Its
// forward takes the batch's images too; their tokens replace the placeholders' embeddings
// (image_tokens.h). The encoder and the connector run in every forward, on no patches when the batch
// has no image, so every parameter gets a gradient on every rank.
#pragma once
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "model/activation_checkpoint.h"
#include "data/sample_dataset.h"
#include "model/block.h"
#include "model/connector.h"
#include "model/embedding.h"
#include "model/forward_part_hooks.h"
#include "model/linear.h"
#include "model/mixed_precision.h"
#include "model/norm.h"
#include "model/row_blocked_table.h"
#include "model/transformer_config.h"
#include "model/vision_encoder.h"

namespace dtrain {

// Blocks [first, end) of the whole model; end -1 is n_layer.
struct BlockRange {
  int first = 0, end = -1;
};

// Which parts of the whole model a model holds; the default is all of them, as one chunk. A pipeline
// rank holds one chunk of consecutive blocks per virtual stage, the chunks apart from each other.
struct TransformerParts {
  bool embedding = true;                  // wte (and GPT-2's wpe): the model takes tokens, else hidden states
  std::vector<BlockRange> chunks{BlockRange{}};  // increasing and disjoint; a chunk may be empty
  bool head = true;                       // ln_f and the output head: the model returns logits, else hidden states

  // One chunk of blocks [first, end), with the embedding when first is 0 and the head when end is
  // n_layer (what a pipeline stage holds).
  static TransformerParts stage(int first, int end, int n_layer);
  // These chunks, with the embedding when one starts at block 0 and the head when one ends at n_layer
  // (what a pipeline rank holds under virtual stages).
  static TransformerParts stages(const std::vector<BlockRange>& chunks, int n_layer);
  // Blocks [first, end) alone: hidden states in, hidden states out.
  static TransformerParts blocks(int first, int end);
  // Throws std::invalid_argument unless the chunks are increasing, disjoint ranges of the n_layer
  // blocks and some part is held.
  void validate(int n_layer) const;
  // The blocks held, in increasing order.
  std::vector<int> block_indices(int n_layer) const;
};

class TransformerImpl : public torch::nn::Module {
 public:
  // Parameters are created on the CPU, each initialised from (seed, its name) by GPT-2's scheme
  // (parameter_init.h), so every rank builds the same model and any range of it holds the whole
  // model's weights; move it with ->to(device) afterwards. A vision-language model is built whole
  // (std::invalid_argument otherwise).
  TransformerImpl(const TransformerConfig& c, uint64_t seed, const TransformerParts& parts = {});

  // With the embedding: tokens [batch, T] (int64, T ≤ seq_len); else hidden states [batch, T, d_model].
  // With the head: logits [batch, T, vocab]; else hidden states [batch, T, d_model].
  // The loss is a separate function (loss.h). A model of one chunk only. A vision-language model
  // takes the batch's images, which may be none (VisionEncoderImpl::forward says what it checks);
  // a text model takes none (std::invalid_argument).
  at::Tensor forward(const at::Tensor& input, const ImageBatch& images = {});
  // Chunk `k` of parts().chunks: its blocks, after the embedding when the chunk starts at block 0 and
  // the model holds it, and before the head when it ends at n_layer and the model holds that. Text
  // models only.
  at::Tensor forward_chunk(size_t k, const at::Tensor& input);

  const TransformerConfig& config() const { return c_; }
  const TransformerParts& parts() const { return parts_; }
  // The parts this model holds, in forward order, each with the parameters it owns (for ZeRO's units).
  std::vector<ForwardPart> forward_parts() const;

  // What backward recomputes instead of keeping; the computed values are the same bits either way.
  void set_activation_checkpointing(const ActivationCheckpointing& ac);
  // The group a checkpointed block input is split over under ac.store.partition: ranks that hold
  // the same block input (tensor parallelism's). Null or one rank: kept whole.
  void set_activation_partition_group(std::shared_ptr<Group> group);
  // Where the inputs of blocks recomputed whole are kept; null when autograd keeps them.
  const std::shared_ptr<ActivationStore>& activation_store() const { return activation_store_; }
  // What the matmuls compute in (fp32 by default). Working copies are made on the parameters'
  // device: set it after moving the model, then refresh_working_copy() after every change to them.
  void set_precision(const MixedPrecision& mp);
  const MixedPrecision& precision() const { return mp_; }
  // Rounds the parameters into their 16-bit working copies: once per optimizer step.
  void refresh_working_copy();
  // The layers whose weights are matmul operands, which mixed precision keeps working copies of.
  std::vector<Linear> matmul_layers() const;
  // Their weights that nothing but the matmuls reads: under mixed precision they are used only as
  // their working copies. All but a tied embedding the model looks tokens up in, in fp32.
  std::vector<at::Tensor> matmul_only_weights() const;
  // Called around each part of every forward pass (null: none). The hooks outlive the model's use.
  void set_part_hooks(ForwardPartHooks* hooks) { hooks_ = hooks; }
  // The tied token table read in row blocks by the lookup and the head (row_blocked_table.h), for a
  // model holding both and tied; null: read whole. The table outlives the model's use.
  void set_row_blocked_table(RowBlockedTable* table);
  // How the layers that read one input run together, in every block and in the head (layer_hooks.h).
  void set_input_linears(const InputLinears& run);
  // What the embeddings' output becomes before the first block (layer_hooks.h).
  void set_after_embedding(HiddenMapping map) { after_embedding_ = std::move(map); }
  // What every block's attention core becomes (layer_hooks.h).
  void set_attention_core(const AttentionCore& core);
  // The part of each sequence this model computes (context parallelism): the global positions of its
  // tokens, int64 [T_local] on the model's device, in the order it holds them. The model then takes
  // whole sequences of model.seq_len tokens and keeps those tokens, or hidden states of its T_local
  // tokens; learned positions and RoPE read the global positions. Undefined: every token, in order.
  void set_sequence_shard(at::Tensor positions);

 private:
  // RoPE's tables for the tokens of the sequence this model computes: its positions, or all
  // model.seq_len, of which a shorter sequence reads the first rows. Not from the input's length: a
  // chunk taking hidden states under sequence parallelism holds a shard of the tokens attention sees.
  void prepare_rope(const at::Device& device);
  // Runs `run` as part `index` of the forward pass, between the part hooks.
  at::Tensor run_part(int index, const std::function<at::Tensor()>& run);
  // A chunk, with the image tokens that replace the placeholders (a vision-language model's).
  at::Tensor run_chunk(size_t k, const at::Tensor& input, const at::Tensor& image_tokens);
  // The image tokens of `images` in the LLM's width: the encoder's parts and the connector's.
  at::Tensor encode_images(const ImageBatch& images);
  const Block& block(int index) const { return blocks_.at(index); }
  // Whether some parameter of block `index` needs a gradient (none: frozen whole).
  bool trains(int index) const;

  TransformerConfig c_;
  TransformerParts parts_;  // every chunk's end resolved
  VisionEncoder vision_{nullptr};  // a vision-language model's, with the connector; null in a text model
  Connector connector_{nullptr};
  int llm_first_part_ = 0;  // the index of the LLM's first forward part: after the vision side's
  Embedding wte{nullptr}, wpe{nullptr};  // wte also when only a head tied to it is held
  std::shared_ptr<torch::nn::Module> block_container_;  // children named by their global index
  std::map<int, Block> blocks_;                          // by global index
  Norm ln_f{nullptr};
  Linear lm_head{nullptr};  // untied head
  Linear head_{nullptr};    // the head used: lm_head, or a layer over wte's weight (not registered)
  at::Tensor rope_cos_, rope_sin_;  // built lazily, on the device in use
  at::Tensor positions_;             // of this model's tokens in the whole sequence; undefined: all
  ActivationCheckpointing ac_;
  std::shared_ptr<Group> activation_partition_group_;
  std::shared_ptr<ActivationStore> activation_store_;
  MixedPrecision mp_;
  ForwardPartHooks* hooks_ = nullptr;
  RowBlockedTable* row_blocked_table_ = nullptr;
  InputLinears head_input_;
  HiddenMapping after_embedding_;
};
TORCH_MODULE(Transformer);

}  // namespace dtrain

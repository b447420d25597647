#include "model/transformer.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "model/image_tokens.h"
#include "model/parameter_init.h"
#include "model/row_blocked_layers.h"

namespace dtrain {

TransformerParts TransformerParts::stage(int first, int end, int n_layer) { return stages({{first, end}}, n_layer); }

TransformerParts TransformerParts::stages(const std::vector<BlockRange>& chunks, int n_layer) {
  TransformerParts p;
  p.chunks = chunks;
  p.embedding = !chunks.empty() && chunks.front().first == 0;
  p.head = !chunks.empty() && (chunks.back().end < 0 ? n_layer : chunks.back().end) == n_layer;
  return p;
}

TransformerParts TransformerParts::blocks(int first, int end) {
  TransformerParts p;
  p.embedding = p.head = false;
  p.chunks = {{first, end}};
  return p;
}

void TransformerParts::validate(int n_layer) const {
  int after = 0;  // where the next chunk may start
  for (const BlockRange& r : chunks) {
    const int end = r.end < 0 ? n_layer : r.end;
    if (r.first < after || r.first > end || end > n_layer)
      throw std::invalid_argument("a model's blocks [" + std::to_string(r.first) + ", " + std::to_string(end) +
                                  ") are not a range of the " + std::to_string(n_layer) +
                                  " blocks of model.n_layer after the chunks before them");
    after = end;
  }
  if (!embedding && !head && block_indices(n_layer).empty()) throw std::invalid_argument("a model must hold at least one of its parts");
}

std::vector<int> TransformerParts::block_indices(int n_layer) const {
  std::vector<int> out;
  for (const BlockRange& r : chunks)
    for (int i = r.first; i < (r.end < 0 ? n_layer : r.end); ++i) out.push_back(i);
  return out;
}

TransformerImpl::TransformerImpl(const TransformerConfig& c, uint64_t seed, const TransformerParts& parts) : c_(c), parts_(parts) {
  c.validate();
  parts.validate(c.n_layer);
  for (BlockRange& r : parts_.chunks)
    if (r.end < 0) r.end = c.n_layer;
  const bool gpt2 = !c.is_llama();
  // A vision-language model's vision side comes first, and its LLM registers under "llm".
  torch::nn::Module* llm = this;
  if (c.is_vlm()) {
    const bool whole = parts_.embedding && parts_.head && parts_.chunks.size() == 1 && parts_.chunks[0].first == 0;
    if (!whole) throw std::invalid_argument("a vision-language model (model.arch \"vlm\") is built whole: it is not split into stages");
    vision_ = register_module("vision", VisionEncoder(c.vision, c.norm_eps));
    connector_ = register_module("connector", Connector(c.vision.merged_dim(), c.d_model));
    llm = register_module("llm", std::make_shared<torch::nn::Module>()).get();
    llm_first_part_ = vision_->part_count() + 1;
  }
  // The whole model registers wte, wpe, the blocks, ln_f, lm_head. A head tied to the embedding on a
  // model without the embedding brings wte along, in lm_head's place.
  if (parts_.embedding) {
    wte = llm->register_module("wte", Embedding(c.vocab_size, c.d_model));
    if (gpt2) wpe = llm->register_module("wpe", Embedding(c.seq_len, c.d_model));
  }
  block_container_ = llm->register_module("blocks", std::make_shared<torch::nn::Module>());
  for (int i : parts_.block_indices(c.n_layer)) blocks_.emplace(i, block_container_->register_module(std::to_string(i), Block(c)));
  if (parts_.head) {
    ln_f = llm->register_module("ln_f", Norm(gpt2 ? NormImpl::Kind::LayerNorm : NormImpl::Kind::RmsNorm, c.d_model, c.norm_eps));
    if (!c.tie_embeddings) {
      head_ = lm_head = llm->register_module("lm_head", Linear(c.d_model, c.vocab_size, false));
    } else {
      if (!wte) wte = llm->register_module("wte", Embedding(c.vocab_size, c.d_model));
      head_ = Linear(wte->weight);
    }
  }
  // A tied table's gradient arrives in two contributions, the head's (dense, the table's size) and
  // the lookup's. ATen's lookup gradient is dense too: a second table-sized buffer (147 MiB on GPT-2),
  // alive beside the head's until autograd sums them, the largest transient of a step (of ZeRO-3's
  // above all, where the gathered table is alive with both). Sparse, it is added into the head's
  // buffer in place, each row summed over the same tokens.
  if (c.tie_embeddings && parts_.embedding && parts_.head) wte->set_sparse_gradient(true);
  // The vision encoder's residual projections scale with its own depth.
  for (auto& item : named_parameters())
    initialise_parameter(item.key(), item.value(), item.key().rfind("vision.", 0) == 0 ? c.vision.n_layer : c.n_layer, seed);
}

std::vector<ForwardPart> TransformerImpl::forward_parts() const {
  const std::string llm = c_.llm_prefix();
  using Modules = std::vector<std::pair<std::string, const torch::nn::Module*>>;
  std::vector<ForwardPart> parts;
  if (vision_) {
    parts = vision_->forward_parts("vision", 0);
    parts.push_back(make_forward_part(ForwardPart::Kind::Connector, vision_->part_count(), {{"connector", connector_.get()}}));
  }
  if (parts_.embedding) {
    Modules modules{{llm + "wte", wte.get()}};
    if (wpe) modules.emplace_back(llm + "wpe", wpe.get());
    parts.push_back(make_forward_part(ForwardPart::Kind::Embeddings, llm_first_part_, modules));
  }
  for (const auto& [i, b] : blocks_)
    parts.push_back(make_forward_part(ForwardPart::Kind::Block, llm_first_part_ + i + 1, {{llm + "blocks." + std::to_string(i), b.get()}}));
  if (parts_.head) {
    Modules modules{{llm + "ln_f", ln_f.get()}};
    if (lm_head) modules.emplace_back(llm + "lm_head", lm_head.get());
    else if (!parts_.embedding) modules.emplace_back(llm + "wte", wte.get());
    parts.push_back(make_forward_part(ForwardPart::Kind::Head, llm_first_part_ + c_.n_layer + 1, modules));
    if (c_.tie_embeddings && parts_.embedding) parts.back().borrowed.push_back(llm + "wte.weight");
  }
  return parts;
}

void TransformerImpl::set_input_linears(const InputLinears& run) {
  for (auto& [i, b] : blocks_) b->set_input_linears(run);
  head_input_ = run;
}

void TransformerImpl::set_row_blocked_table(RowBlockedTable* table) {
  TORCH_CHECK(!table || (c_.tie_embeddings && parts_.embedding && parts_.head),
              "a row-blocked table serves a tied head and the lookup on the same model");
  row_blocked_table_ = table;
}

void TransformerImpl::set_sequence_shard(at::Tensor positions) {
  positions_ = std::move(positions);
  rope_cos_ = rope_sin_ = at::Tensor();  // built again for these positions
}

void TransformerImpl::set_attention_core(const AttentionCore& core) {
  for (auto& [i, b] : blocks_) b->set_attention_core(core);
}

void TransformerImpl::set_activation_checkpointing(const ActivationCheckpointing& ac) {
  ac_ = ac;
  for (auto& [i, b] : blocks_) b->recompute_attention_core(ac.attention_core());
  activation_store_ = ActivationStore::make(ac.store, activation_partition_group_);
}

void TransformerImpl::set_activation_partition_group(std::shared_ptr<Group> group) {
  activation_partition_group_ = std::move(group);
  activation_store_ = ActivationStore::make(ac_.store, activation_partition_group_);
}

void TransformerImpl::set_precision(const MixedPrecision& mp) {
  mp_ = mp;
  for (auto& [i, b] : blocks_) b->set_precision(mp);
  if (head_) head_->set_precision(mp);
  if (vision_) {
    vision_->set_precision(mp);
    connector_->set_precision(mp);
  }
}

std::vector<Linear> TransformerImpl::matmul_layers() const {
  std::vector<Linear> layers;
  if (head_) layers.push_back(head_);
  for (const auto& [i, b] : blocks_)
    for (const auto& layer : b->matmul_layers()) layers.push_back(layer);
  if (vision_) {
    for (const auto& layer : vision_->matmul_layers()) layers.push_back(layer);
    for (const auto& layer : connector_->matmul_layers()) layers.push_back(layer);
  }
  return layers;
}

std::vector<at::Tensor> TransformerImpl::matmul_only_weights() const {
  std::vector<at::Tensor> weights;
  for (const auto& layer : matmul_layers())
    if (!parts_.embedding || !layer->weight.is_same(wte->weight)) weights.push_back(layer->weight);
  return weights;
}

void TransformerImpl::refresh_working_copy() {
  for (auto& layer : matmul_layers()) layer->refresh_working_copy();
}

void TransformerImpl::prepare_rope(const at::Device& device) {
  if (!c_.is_llama() || (rope_cos_.defined() && rope_cos_.device() == device)) return;
  const int64_t half = c_.head_dim() / 2;
  auto opts = at::TensorOptions().dtype(at::kDouble).device(device);
  auto inv_freq = at::pow(c_.rope_theta, -at::arange(0, half, opts) / double(half));
  const at::Tensor positions = positions_.defined() ? positions_.to(opts) : at::arange(0, c_.seq_len, opts);
  auto angles = at::outer(positions, inv_freq);  // [T, half]
  rope_cos_ = angles.cos().to(at::kFloat);
  rope_sin_ = angles.sin().to(at::kFloat);
}

at::Tensor TransformerImpl::forward(const at::Tensor& input, const ImageBatch& images) {
  TORCH_CHECK(parts_.chunks.size() == 1, "forward() runs a model of one chunk; this one holds ", parts_.chunks.size(),
              ": run each with forward_chunk()");
  if (vision_) return run_chunk(0, input, encode_images(images));
  if (images.count() > 0)
    throw std::invalid_argument("a batch of " + std::to_string(images.count()) + " image(s) for a text model (model.arch \"" + c_.arch +
                                "\"): images need model.arch \"vlm\"");
  return run_chunk(0, input, at::Tensor());
}

at::Tensor TransformerImpl::forward_chunk(size_t k, const at::Tensor& input) {
  TORCH_CHECK(!vision_, "a vision-language model runs whole, with its images: forward(), not forward_chunk()");
  return run_chunk(k, input, at::Tensor());
}

at::Tensor TransformerImpl::encode_images(const ImageBatch& images) {
  const RunPart run = [this](int index, const std::function<at::Tensor()>& part) { return run_part(index, part); };
  const at::Tensor features = vision_->forward(images, 0, run);
  // In fp32, as the embeddings it takes the place of.
  return run_part(vision_->part_count(), [&] { return connector_(features).to(at::kFloat); });
}

bool TransformerImpl::trains(int index) const {
  const auto parameters = block(index)->parameters();
  return std::any_of(parameters.begin(), parameters.end(), [](const at::Tensor& p) { return p.requires_grad(); });
}

// Around each part, outside its activation checkpoint: a recomputation in backward is not a new part.
at::Tensor TransformerImpl::run_part(int index, const std::function<at::Tensor()>& run) {
  if (hooks_) hooks_->before_part(index);
  at::Tensor out = run();
  if (hooks_) hooks_->after_part(index, out);
  return out;
}

at::Tensor TransformerImpl::run_chunk(size_t k, const at::Tensor& input, const at::Tensor& image_tokens) {
  TORCH_CHECK(k < parts_.chunks.size(), "chunk ", k, " of a model holding ", parts_.chunks.size());
  const BlockRange& range = parts_.chunks[k];
  const bool embed = parts_.embedding && range.first == 0, head = parts_.head && range.end == c_.n_layer;
  if (embed) {
    TORCH_CHECK(input.dim() == 2 && input.scalar_type() == at::kLong, "a model holding the embedding takes tokens [batch, T] (int64), got ",
                input.scalar_type(), " ", input.sizes());
  } else {
    TORCH_CHECK(input.dim() == 3 && input.size(2) == c_.d_model, "a chunk without the embedding takes hidden states [batch, T, ",
                c_.d_model, "], got ", input.sizes());
  }
  const int64_t T = input.size(1);
  TORCH_CHECK(T <= c_.seq_len, "sequence of ", T, " tokens is longer than model.seq_len ", c_.seq_len);
  if (positions_.defined()) {
    if (positions_.device() != input.device()) positions_ = positions_.to(input.device());
    // Hidden states are this rank's part already (or, under sequence parallelism, this tp rank's part of it).
    TORCH_CHECK(!embed || T == c_.seq_len, "a model computing ", positions_.size(0),
                " tokens of each sequence (context parallelism) takes whole sequences of model.seq_len ", c_.seq_len, " tokens, got ", T);
  }
  prepare_rope(input.device());
  const int first = llm_first_part_;
  at::Tensor x = input;
  if (embed) {
    x = run_part(first, [&] {
      const at::Tensor tokens = positions_.defined() ? input.index_select(1, positions_) : input;
      auto e = row_blocked_table_ ? row_blocked_lookup(*row_blocked_table_, wte->weight, tokens) : wte(tokens);
      if (wpe) e = e + (positions_.defined() ? wpe->weight.index_select(0, positions_) : wpe->weight.narrow(0, 0, T));
      if (image_tokens.defined()) e = place_image_tokens(e, tokens, image_tokens, c_.vision.image_token_id);
      return after_embedding_ ? after_embedding_(e) : e;
    });
  }
  for (int i = range.first; i < range.end; ++i) {
    auto whole = [b = block(i).ptr(), cos = rope_cos_, sin = rope_sin_](const std::vector<at::Tensor>& in) {
      return b->forward(in[0], cos, sin);
    };
    x = run_part(first + i + 1, [&] { return ac_.whole_block(i) ? checkpoint(whole, {x}, activation_store_, trains(i)) : whole({x}); });
  }
  if (head) {
    x = run_part(first + c_.n_layer + 1, [&] {
      const at::Tensor h = ln_f(x);
      if (row_blocked_table_) return row_blocked_head(*row_blocked_table_, mp_, wte->weight, h);
      return head_input_ ? head_input_(h, {head_.get()})[0] : head_(h);
    });
  }
  return x;
}

}  // namespace dtrain

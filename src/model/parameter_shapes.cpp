#include "model/parameter_shapes.h"

namespace dtrain {

namespace {

// A model's parameters in registration order, appended to `out`.
class ShapeList {
 public:
  explicit ShapeList(std::vector<ParameterShape>& out) : out_(out) {}

  // A linear layer or a norm: its weight, and its bias when it has one.
  void linear(const std::string& name, int64_t out_features, int64_t in_features, bool bias) {
    out_.push_back({name + ".weight", {out_features, in_features}});
    if (bias) out_.push_back({name + ".bias", {out_features}});
  }
  void norm(const std::string& name, int64_t d, bool bias) {
    out_.push_back({name + ".weight", {d}});
    if (bias) out_.push_back({name + ".bias", {d}});
  }
  void table(const std::string& name, int64_t rows, int64_t d) { out_.push_back({name + ".weight", {rows, d}}); }

  // One block of `c`'s shape (block.h): GPT-2's kind has biases and no gate.
  void block(const std::string& name, const TransformerConfig& c) {
    const int64_t d = c.d_model, f = c.ff_dim(), q = int64_t(c.n_head) * c.head_dim(), kv = int64_t(c.kv_heads()) * c.head_dim();
    const bool gpt2 = !c.is_llama();
    norm(name + ".ln1", d, gpt2);
    linear(name + ".q_proj", q, d, gpt2);
    linear(name + ".k_proj", kv, d, gpt2);
    linear(name + ".v_proj", kv, d, gpt2);
    linear(name + ".o_proj", d, q, gpt2);
    norm(name + ".ln2", d, gpt2);
    if (!gpt2) linear(name + ".gate_proj", f, d, gpt2);
    linear(name + ".up_proj", f, d, gpt2);
    linear(name + ".down_proj", d, f, gpt2);
  }

 private:
  std::vector<ParameterShape>& out_;
};

// vision_encoder.h's and connector.h's parameters.
void vision_side(ShapeList& list, const TransformerConfig& c) {
  const VisionConfig& v = c.vision;
  list.linear("vision.patch_embed", v.d_model, v.patch_values(), true);
  list.table("vision.row_embed", v.max_grid, v.d_model);
  list.table("vision.col_embed", v.max_grid, v.d_model);
  TransformerConfig blocks;  // the encoder's blocks: GPT-2's kind
  blocks.n_head = v.n_head;
  blocks.d_model = v.d_model;
  blocks.d_ff = v.ff_dim();
  for (int i = 0; i < v.n_layer; ++i) list.block("vision.blocks." + std::to_string(i), blocks);
  list.norm("vision.ln_post", v.d_model, true);
  list.linear("connector.fc1", c.d_model, v.merged_dim(), true);
  list.linear("connector.fc2", c.d_model, c.d_model, true);
}

}  // namespace

std::vector<ParameterShape> parameter_shapes(const TransformerConfig& c) {
  const int64_t d = c.d_model;
  const bool gpt2 = !c.is_llama();
  const std::string llm = c.llm_prefix();
  std::vector<ParameterShape> out;
  ShapeList list(out);
  if (c.is_vlm()) vision_side(list, c);
  list.table(llm + "wte", c.vocab_size, d);
  if (gpt2) list.table(llm + "wpe", c.seq_len, d);
  for (int i = 0; i < c.n_layer; ++i) list.block(llm + "blocks." + std::to_string(i), c);
  list.norm(llm + "ln_f", d, gpt2);
  if (!c.tie_embeddings) list.table(llm + "lm_head", c.vocab_size, d);
  return out;
}

std::vector<std::string> parameter_names(const TransformerConfig& c) {
  std::vector<std::string> names;
  for (const auto& p : parameter_shapes(c)) names.push_back(p.name);
  return names;
}

std::optional<int> block_of(const TransformerConfig& c, const std::string& name) {
  const std::string blocks = c.llm_prefix() + "blocks.";
  if (name.rfind(blocks, 0) != 0) return std::nullopt;
  return std::stoi(name.substr(blocks.size()));
}

}  // namespace dtrain

#include "model/parameter_shapes.h"

namespace dtrain {

std::vector<ParameterShape> parameter_shapes(const TransformerConfig& c) {
  const int64_t d = c.d_model, f = c.ff_dim(), qkv = int64_t(c.n_head + 2 * c.kv_heads()) * c.head_dim();
  const bool gpt2 = !c.is_llama();
  std::vector<ParameterShape> out;
  // A layer's weight, and GPT-2's bias.
  auto layer = [&](const std::string& name, std::vector<int64_t> weight) {
    const int64_t rows = weight[0];
    out.push_back({name + ".weight", std::move(weight)});
    if (gpt2) out.push_back({name + ".bias", {rows}});
  };
  out.push_back({"wte.weight", {c.vocab_size, d}});
  if (gpt2) out.push_back({"wpe.weight", {c.seq_len, d}});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string block = "blocks." + std::to_string(i) + ".";
    layer(block + "ln1", {d});
    layer(block + "qkv", {qkv, d});  // q, k and v, one above the other
    layer(block + "proj", {d, d});
    layer(block + "ln2", {d});
    layer(block + "fc", {gpt2 ? f : 2 * f, d});  // Llama's gate and up, one above the other
    layer(block + "fc_proj", {d, f});
  }
  layer("ln_f", {d});
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, d}});
  return out;
}

}  // namespace dtrain

#include "model/parameter_shapes.h"

namespace dtrain {

std::vector<ParameterShape> parameter_shapes(const TransformerConfig& c) {
  const int64_t d = c.d_model, f = c.ff_dim(), q = int64_t(c.n_head) * c.head_dim(), kv = int64_t(c.kv_heads()) * c.head_dim();
  const bool gpt2 = !c.is_llama();
  std::vector<ParameterShape> out;
  // A linear layer or a norm: its weight, and GPT-2's bias.
  auto linear = [&](const std::string& name, int64_t out_features, int64_t in_features) {
    out.push_back({name + ".weight", {out_features, in_features}});
    if (gpt2) out.push_back({name + ".bias", {out_features}});
  };
  auto norm = [&](const std::string& name) {
    out.push_back({name + ".weight", {d}});
    if (gpt2) out.push_back({name + ".bias", {d}});
  };
  out.push_back({"wte.weight", {c.vocab_size, d}});
  if (gpt2) out.push_back({"wpe.weight", {c.seq_len, d}});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string block = "blocks." + std::to_string(i) + ".";
    norm(block + "ln1");
    linear(block + "q_proj", q, d);
    linear(block + "k_proj", kv, d);
    linear(block + "v_proj", kv, d);
    linear(block + "o_proj", d, q);
    norm(block + "ln2");
    if (!gpt2) linear(block + "gate_proj", f, d);
    linear(block + "up_proj", f, d);
    linear(block + "down_proj", d, f);
  }
  norm("ln_f");
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, d}});
  return out;
}

std::vector<std::string> parameter_names(const TransformerConfig& c) {
  std::vector<std::string> names;
  for (const auto& p : parameter_shapes(c)) names.push_back(p.name);
  return names;
}

}  // namespace dtrain

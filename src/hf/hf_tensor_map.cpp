#include "hf/hf_tensor_map.h"

#include <map>
#include <stdexcept>

#include "model/parameter_shapes.h"

namespace dtrain {

namespace {

// One tensor per dtrain name, renamed: `hf` + suffix for each of the layer's weight and bias.
struct Family {
  const TransformerConfig& c;
  const std::map<std::string, std::vector<int64_t>>& shapes;
  std::vector<HfTensor>& out;

  bool has(const std::string& name) const { return shapes.count(name) > 0; }
  // The tensor that stacks `parts` (dtrain names without ".weight"/".bias") along the output dim.
  void add(const std::string& hf, const std::vector<std::string>& parts, bool transposed) {
    for (const std::string suffix : {".weight", ".bias"}) {
      if (!has(parts.front() + suffix)) continue;
      HfTensor t{hf + suffix, {}, {}, transposed && suffix == ".weight"};
      int64_t rows = 0;
      for (const auto& p : parts) {
        t.parts.push_back(p + suffix);
        rows += shapes.at(p + suffix)[0];
      }
      t.shape = shapes.at(t.parts.front());
      t.shape[0] = rows;
      if (t.transposed) std::swap(t.shape[0], t.shape[1]);
      out.push_back(std::move(t));
    }
  }
};

}  // namespace

std::vector<HfTensor> hf_tensors(const TransformerConfig& c, int64_t positions) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParameterShape& s : parameter_shapes(c)) shapes[s.name] = s.shape;
  shapes["wpe.weight"] = {positions, c.d_model};  // GPT-2 alone has one
  if (c.is_llama()) shapes.erase("wpe.weight");
  std::vector<HfTensor> out;
  Family f{c, shapes, out};
  const bool llama = c.is_llama();
  const std::string top = llama ? "model." : "transformer.";
  f.add(top + (llama ? "embed_tokens" : "wte"), {"wte"}, false);
  if (!llama) f.add(top + "wpe", {"wpe"}, false);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    const std::string h = top + (llama ? "layers." : "h.") + std::to_string(i) + ".";
    if (llama) {
      f.add(h + "input_layernorm", {b + "ln1"}, false);
      for (const std::string p : {"q_proj", "k_proj", "v_proj", "o_proj"}) f.add(h + "self_attn." + p, {b + p}, false);
      f.add(h + "post_attention_layernorm", {b + "ln2"}, false);
      for (const std::string p : {"gate_proj", "up_proj", "down_proj"}) f.add(h + "mlp." + p, {b + p}, false);
    } else {
      f.add(h + "ln_1", {b + "ln1"}, false);
      f.add(h + "attn.c_attn", {b + "q_proj", b + "k_proj", b + "v_proj"}, true);
      f.add(h + "attn.c_proj", {b + "o_proj"}, true);
      f.add(h + "ln_2", {b + "ln2"}, false);
      f.add(h + "mlp.c_fc", {b + "up_proj"}, true);
      f.add(h + "mlp.c_proj", {b + "down_proj"}, true);
    }
  }
  f.add(top + (llama ? "norm" : "ln_f"), {"ln_f"}, false);
  if (!c.tie_embeddings) f.add("lm_head", {"lm_head"}, false);
  return out;
}

HfSource hf_source(const std::vector<HfTensor>& tensors, const TransformerConfig& c, const std::string& name) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParameterShape& s : parameter_shapes(c)) shapes[s.name] = s.shape;
  for (const HfTensor& t : tensors) {
    int64_t offset = 0;
    for (const std::string& part : t.parts) {
      if (part == name) return {&t, offset};
      offset += shapes.at(part)[0];
    }
  }
  throw std::logic_error("no Hugging Face tensor holds dtrain's parameter '" + name + "'");
}

}  // namespace dtrain

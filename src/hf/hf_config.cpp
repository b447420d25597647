#include "hf/hf_config.h"

#include <stdexcept>

#include "ckpt/durable_file.h"
#include "common/printable.h"

namespace dtrain {

namespace {

using json = nlohmann::json;

// GPT-2's token ids in its 50257-token vocabulary: <|endoftext|> begins and ends a text.
constexpr int kGpt2EndOfText = 50256;

struct Keys {
  const json& j;
  std::string path;

  [[noreturn]] void fail(const std::string& what) const { throw std::runtime_error(path + ": " + what); }
  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int integer(const char* key) const {
    if (!has(key)) fail("has no '" + std::string(key) + "'");
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0 || j[key].get<int64_t>() > INT32_MAX)
      fail("'" + std::string(key) + "' is " + j[key].dump() + ", not a size");
    return j[key].get<int>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_number()) fail("'" + std::string(key) + "' is " + j[key].dump() + ", not a number");
    return j[key].get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) fail("'" + std::string(key) + "' is " + j[key].dump() + ", not true or false");
    return j[key].get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_string()) fail("'" + std::string(key) + "' is " + j[key].dump() + ", not a string");
    return j[key].get<std::string>();
  }
  // A key dtrain's model has no counterpart of, accepted at the value the model computes with.
  void require(const char* key, const json& value, const std::string& why) const {
    if (has(key) && j[key] != value) fail("'" + std::string(key) + "' is " + j[key].dump() + ", but " + why);
  }
};

HfModelShape gpt2_shape(const Keys& k) {
  HfModelShape s;
  TransformerConfig& c = s.config;
  c.arch = "gpt2";
  c.n_layer = k.integer("n_layer");
  c.n_head = k.integer("n_head");
  c.d_model = k.integer("n_embd");
  c.d_ff = k.has("n_inner") ? k.integer("n_inner") : 0;
  c.vocab_size = k.integer("vocab_size");
  c.seq_len = k.integer("n_positions");
  c.tie_embeddings = k.boolean("tie_word_embeddings", true);
  c.norm_eps = k.number("layer_norm_epsilon", 1e-5);
  const std::string act = k.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    k.fail("'activation_function' is \"" + printable(act) + "\", but dtrain's GPT-2 computes GELU's tanh approximation (gelu_new)");
  k.require("scale_attn_weights", true, "dtrain scales attention scores by 1/sqrt(head_dim)");
  k.require("scale_attn_by_inverse_layer_idx", false, "dtrain does not scale attention by layer");
  s.positions = c.seq_len;
  return s;
}

HfModelShape llama_shape(const Keys& k) {
  HfModelShape s;
  TransformerConfig& c = s.config;
  c.arch = "llama";
  c.n_layer = k.integer("num_hidden_layers");
  c.n_head = k.integer("num_attention_heads");
  c.n_kv_head = k.has("num_key_value_heads") ? k.integer("num_key_value_heads") : c.n_head;
  c.d_model = k.integer("hidden_size");
  c.d_ff = k.integer("intermediate_size");
  c.vocab_size = k.integer("vocab_size");
  c.seq_len = k.integer("max_position_embeddings");
  c.tie_embeddings = k.boolean("tie_word_embeddings", false);
  c.norm_eps = k.number("rms_norm_eps", 1e-6);
  // transformers 5 keeps RoPE's settings in rope_parameters, earlier releases in rope_theta and rope_scaling.
  const json none = json::object();
  const json& rope = k.has("rope_parameters") ? k.j["rope_parameters"] : none;
  const Keys r{rope, k.path + " rope_parameters"};
  c.rope_theta = r.has("rope_theta") ? r.number("rope_theta", 10000.0) : k.number("rope_theta", 10000.0);
  const std::string rope_type = r.text("rope_type", "default");
  if (rope_type != "default" || k.has("rope_scaling"))
    k.fail("scales RoPE (rope_type \"" + printable(rope_type) + "\", rope_scaling " + (k.has("rope_scaling") ? k.j["rope_scaling"].dump() : "null") +
           "), which dtrain's Llama does not: it computes plain RoPE with rope_theta");
  k.require("hidden_act", "silu", "dtrain's Llama computes SwiGLU with SiLU");
  k.require("attention_bias", false, "dtrain's Llama has no attention biases");
  k.require("mlp_bias", false, "dtrain's Llama has no MLP biases");
  if (k.has("head_dim") && k.integer("head_dim") * c.n_head != c.d_model)
    k.fail("'head_dim' is " + std::to_string(k.integer("head_dim")) + ", but dtrain's heads are hidden_size / num_attention_heads = " +
           std::to_string(c.n_head ? c.d_model / c.n_head : 0) + " wide");
  s.positions = c.seq_len;
  return s;
}

}  // namespace

HfModelShape hf_model_shape(const json& config, const std::string& path) {
  if (!config.is_object()) throw std::runtime_error(path + ": is not a JSON object");
  const Keys k{config, path};
  const std::string type = k.text("model_type", "");
  HfModelShape s;
  if (type == "gpt2")
    s = gpt2_shape(k);
  else if (type == "llama")
    s = llama_shape(k);
  else
    k.fail("model_type \"" + printable(type) + "\" is not supported: dtrain imports \"gpt2\" (GPT2LMHeadModel) and \"llama\" (LlamaForCausalLM)");
  try {
    s.config.validate();
  } catch (const std::invalid_argument& e) {
    k.fail(std::string("describes a model dtrain cannot build: ") + e.what());
  }
  return s;
}

HfModelShape read_hf_model_shape(const std::string& dir) {
  const std::string path = dir + "/" + kHfConfigFile;
  json config;
  try {
    config = read_json_file(path);
  } catch (const NotJson& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  return hf_model_shape(config, path);
}

json hf_config(const TransformerConfig& c) {
  if (!c.is_llama()) {
    json j = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", c.vocab_size},
              {"n_positions", c.seq_len}, {"n_embd", c.d_model}, {"n_layer", c.n_layer}, {"n_head", c.n_head},
              {"n_inner", c.ff_dim()}, {"activation_function", "gelu_new"}, {"layer_norm_epsilon", c.norm_eps},
              {"tie_word_embeddings", c.tie_embeddings}, {"scale_attn_weights", true}, {"resid_pdrop", 0.0},
              {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"torch_dtype", "float32"}};
    // GPT2Config defaults both to 50256, outside a smaller vocabulary: say there are none.
    const json end_of_text = c.vocab_size > kGpt2EndOfText ? json(kGpt2EndOfText) : json();
    j.update({{"bos_token_id", end_of_text}, {"eos_token_id", end_of_text}});
    return j;
  }
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", c.vocab_size},
          {"hidden_size", c.d_model}, {"intermediate_size", c.ff_dim()}, {"num_hidden_layers", c.n_layer},
          {"num_attention_heads", c.n_head}, {"num_key_value_heads", c.kv_heads()}, {"head_dim", c.head_dim()},
          {"max_position_embeddings", c.seq_len}, {"rms_norm_eps", c.norm_eps}, {"rope_theta", c.rope_theta},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}}, {"hidden_act", "silu"},
          {"attention_bias", false}, {"mlp_bias", false}, {"tie_word_embeddings", c.tie_embeddings}, {"torch_dtype", "float32"}};
}

json hf_generation_config(const TransformerConfig& c) {
  json j = {{"_from_model_config", true}, {"max_length", c.seq_len}};
  if (!c.is_llama() && c.vocab_size > kGpt2EndOfText) j.update({{"bos_token_id", kGpt2EndOfText}, {"eos_token_id", kGpt2EndOfText}});
  return j;
}

}  // namespace dtrain

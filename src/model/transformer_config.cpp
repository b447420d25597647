#include "model/transformer_config.h"

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>

#include "common/printable.h"
#include "common/range_words.h"

namespace dtrain {

namespace {

// The parameters of each part of the forward pass, in T: int64_t for parameter_count(), double for
// validate() to learn first whether the count of a shape fits an int64 at all.
template <typename T>
struct PartSizes {
  T block, embeddings, final_norm_and_head;
  T total(int n_layer) const { return n_layer * block + embeddings + final_norm_and_head; }
};

template <typename T>
PartSizes<T> part_sizes(const TransformerConfig& c) {
  const T d = c.d_model, f = c.ff_dim(), hd = c.head_dim(), kv = c.kv_heads();
  const T qkv = d * (c.n_head + 2 * kv) * hd, proj = d * d;
  T per_layer, embeddings = T(c.vocab_size) * d, final_norm;
  if (c.is_llama()) {
    per_layer = qkv + proj + 3 * d * f + 2 * d;
    final_norm = d;
  } else {
    per_layer = qkv + (c.n_head + 2 * kv) * hd + proj + d + 2 * d * f + f + d + 4 * d;
    embeddings += T(c.seq_len) * d;
    final_norm = 2 * d;
  }
  const T head = c.tie_embeddings ? 0 : T(c.vocab_size) * d;
  return {per_layer, embeddings, final_norm + head};
}

}  // namespace

int TransformerConfig::ff_dim() const {
  if (d_ff > 0) return d_ff;
  if (!is_llama()) return 4 * d_model;
  // Llama keeps SwiGLU's three matrices at the cost of a 4·d MLP: 2/3·4·d, rounded up to 64.
  int hidden = (8 * d_model) / 3;
  return (hidden + 63) / 64 * 64;
}

void TransformerConfig::validate() const {
  auto fail = [](const std::string& msg) { throw std::invalid_argument(msg); };
  if (arch != "gpt2" && arch != "llama" && arch != "vlm")
    fail("model.arch must be \"gpt2\", \"llama\" or \"vlm\", got \"" + printable(arch) + "\"");
  if (n_layer < 1) fail("model.n_layer must be at least 1");
  if (n_head < 1) fail("model.n_head must be at least 1");
  if (d_model < 1 || d_model % n_head != 0)
    fail("model.d_model (" + std::to_string(d_model) + ") must be a positive multiple of model.n_head (" +
         std::to_string(n_head) + ")");
  if (kv_heads() > n_head || n_head % kv_heads() != 0)
    fail("model.n_kv_head (" + std::to_string(kv_heads()) + ") must divide model.n_head (" + std::to_string(n_head) + ")");
  if (n_kv_head > 0 && n_kv_head != n_head && !is_llama()) fail("model.n_kv_head applies to arch \"llama\" only");
  if (is_llama() && head_dim() % 2 != 0) fail("model.d_model / model.n_head must be even for RoPE");
  if (seq_len < 1) fail("model.seq_len must be at least 1");
  if (vocab_size < 2) fail("model.vocab_size must be at least 2");
  if (d_ff < 0) fail("model.d_ff must be 0 (auto) or positive");
  // ff_dim() is an int that holds up to 4·d_model (8·d_model/3 for llama, via 8·d_model).
  if (d_model > INT_MAX / 8) fail("model.d_model (" + std::to_string(d_model) + ") must be at most " + std::to_string(INT_MAX / 8));
  if (is_vlm()) vision.validate(vocab_size);
  const double parameters = part_sizes<double>(*this).total(n_layer) + (is_vlm() ? vision.parameter_count_in_double(d_model) : 0.0);
  if (parameters > 9e18)
    fail("model.n_layer, model.d_model, model.d_ff, model.vocab_size and model.seq_len" + std::string(is_vlm() ? " with model.vision.*" : "") +
         " give " + number_words(parameters) + " parameters, more than a 64-bit count holds");
}

int64_t TransformerConfig::parameter_count() const {
  return part_sizes<int64_t>(*this).total(n_layer) + (is_vlm() ? vision.parameter_count(d_model) : 0);
}

int64_t TransformerConfig::largest_part_parameters() const {
  const auto parts = part_sizes<int64_t>(*this);
  const int64_t llm = std::max({parts.block, parts.embeddings, parts.final_norm_and_head});
  if (!is_vlm()) return llm;
  return std::max({llm, vision.stem_parameters(), vision.block_parameters(), vision.connector_parameters(d_model)});
}

double TransformerConfig::train_flops_per_token() const {
  return 6.0 * double(part_sizes<int64_t>(*this).total(n_layer)) + 12.0 * n_layer * seq_len * d_model;
}

std::string TransformerConfig::describe() const {
  std::ostringstream s;
  if (is_vlm()) s << vision.describe() << ", connector " << vision.merged_dim() << "->" << d_model << "->" << d_model << ", llm ";
  s << (is_vlm() ? "llama" : arch) << " " << n_layer << "L/" << n_head << "H";
  if (kv_heads() != n_head) s << "/" << kv_heads() << "KV";
  s << " d=" << d_model << " ff=" << ff_dim() << " seq=" << seq_len << " vocab=" << vocab_size << " ("
    << parameter_count() << " parameters)";
  return s.str();
}

std::vector<std::string> model_preset_names() { return {"tiny", "demo", "gpt2-124m", "llama-1b", "vlm-ocr"}; }

TransformerConfig model_preset(const std::string& name) {
  TransformerConfig c;
  if (name == "tiny") {
    c.n_layer = 2; c.n_head = 2; c.d_model = 32; c.seq_len = 16;
  } else if (name == "demo") {
    c.n_layer = 4; c.n_head = 4; c.d_model = 192; c.seq_len = 128;
  } else if (name == "gpt2-124m") {
    c.n_layer = 12; c.n_head = 12; c.d_model = 768; c.seq_len = 1024; c.vocab_size = 50257;
  } else if (name == "llama-1b") {
    // Llama 3.2 1B's shape.
    c.arch = "llama"; c.n_layer = 16; c.n_head = 32; c.n_kv_head = 8; c.d_model = 2048; c.d_ff = 8192;
    c.seq_len = 2048; c.vocab_size = 128256; c.rope_theta = 500000.0;
  } else if (name == "vlm-ocr") {
    // The built-in OCR task's model, small enough to train on two CPU ranks in minutes: bytes and
    // the two reserved ids (256 image, 257 end) under a vocabulary of 264; an image line of up to
    // 4 x 32 patches of 8 pixels takes 32 merged tokens of the 128, column by column as the line reads.
    c.arch = "vlm"; c.n_layer = 4; c.n_head = 6; c.n_kv_head = 2; c.d_model = 192; c.seq_len = 128; c.vocab_size = 264;
    c.vision.token_order = "columns";
  } else {
    std::string known;
    for (const auto& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("model.preset \"" + printable(name) + "\" is unknown (known: " + known + ")");
  }
  return c;
}

nlohmann::json to_json(const TransformerConfig& c) {
  nlohmann::json j = {{"arch", c.arch},         {"n_layer", c.n_layer},   {"n_head", c.n_head},
                      {"n_kv_head", c.kv_heads()}, {"d_model", c.d_model}, {"d_ff", c.ff_dim()},
                      {"seq_len", c.seq_len},   {"vocab_size", c.vocab_size}, {"tie_embeddings", c.tie_embeddings},
                      {"norm_eps", c.norm_eps}, {"rope_theta", c.rope_theta}};
  if (c.is_vlm()) j["vision"] = to_json(c.vision);
  return j;
}

TransformerConfig transformer_config_from_json(const nlohmann::json& j) {
  TransformerConfig c;
  c.arch = j.at("arch").get<std::string>();
  c.n_layer = j.at("n_layer");
  c.n_head = j.at("n_head");
  c.n_kv_head = j.at("n_kv_head");
  c.d_model = j.at("d_model");
  c.d_ff = j.at("d_ff");
  c.seq_len = j.at("seq_len");
  c.vocab_size = j.at("vocab_size");
  c.tie_embeddings = j.at("tie_embeddings");
  c.norm_eps = j.at("norm_eps");
  c.rope_theta = j.at("rope_theta");
  if (c.is_vlm()) c.vision = vision_config_from_json(j.at("vision"));
  c.validate();
  return c;
}

}  // namespace dtrain

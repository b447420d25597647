// The Hugging Face `config.json` of the two families dtrain trains, in both directions: GPT-2
// (GPT2LMHeadModel, model_type "gpt2") and Llama (LlamaForCausalLM, model_type "llama", with
// grouped-query attention, RoPE theta and tied or untied embeddings).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "model/transformer_config.h"

namespace dtrain {

constexpr const char* kHfConfigFile = "config.json";

// A Hugging Face model's shape as dtrain's config, with the positions its weights hold: GPT-2's
// learned position table has `positions` rows, of which a run with a shorter seq_len uses the first.
struct HfModelShape {
  TransformerConfig config;  // seq_len: the positions
  int64_t positions = 0;
};

// Reads `config` (the contents of `path`, named in errors). Throws std::runtime_error naming the
// file and the key for a model_type other than "gpt2" or "llama", a missing or malformed key, or a
// feature dtrain's model lacks (another activation, RoPE scaling, attention biases in Llama).
HfModelShape hf_model_shape(const nlohmann::json& config, const std::string& path);
HfModelShape read_hf_model_shape(const std::string& dir);

// What `from_pretrained` reads for `c`: config.json, and generation_config.json's defaults.
nlohmann::json hf_config(const TransformerConfig& c);
nlohmann::json hf_generation_config(const TransformerConfig& c);

}  // namespace dtrain

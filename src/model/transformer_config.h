// The shape of a decoder-only transformer: GPT-2 style (LayerNorm, GELU, learned positions, biases)
// or Llama style (RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases); or of a
// vision-language model (arch "vlm"): a Llama-style LLM with a vision encoder and a connector in
// front of it (vision_config.h). Presets name the shapes the demo, the tests and the benchmarks use.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/vision_config.h"

namespace dtrain {

struct TransformerConfig {
  std::string arch = "gpt2";  // gpt2 | llama | vlm (a llama LLM with `vision`)
  int n_layer = 4;
  int n_head = 4;
  int n_kv_head = 0;          // 0: same as n_head (multi-head); fewer: grouped-query attention
  int d_model = 192;
  int d_ff = 0;               // 0: 4·d_model for gpt2, SwiGLU's rounded 8/3·d_model for llama
  int seq_len = 128;
  int vocab_size = 256;
  bool tie_embeddings = true;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  VisionConfig vision;        // arch vlm only

  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int head_dim() const { return d_model / n_head; }
  int ff_dim() const;
  // A vision-language model's LLM is Llama's.
  bool is_llama() const { return arch == "llama" || arch == "vlm"; }
  bool is_vlm() const { return arch == "vlm"; }
  // What the LLM's parameter names start with: "llm." in a vision-language model, "" in a text one.
  std::string llm_prefix() const { return is_vlm() ? "llm." : ""; }

  // Throws std::invalid_argument naming the model.* key at fault.
  void validate() const;
  // Every parameter, a vision-language model's vision encoder and connector included.
  int64_t parameter_count() const;
  // The parameters of the largest part of the forward pass: a block, the embeddings, or the final
  // norm with the output head (or a part of the vision side). ZeRO stage 3 gathers one unit, at
  // most a part, ahead of its use.
  int64_t largest_part_parameters() const;
  // Training FLOPs per token of the sequence: 6·N for the LLM's matmuls plus 12·layers·seq·d for
  // attention scores (PaLM's appendix B accounting, used for MFU). An image token counts as a
  // token here; what its image cost the vision encoder and the connector depends on the image's
  // size, which the config does not know: VisionConfig::train_flops_per_image counts it.
  double train_flops_per_token() const;
  std::string describe() const;
};

std::vector<std::string> model_preset_names();
// A preset by name (tiny, demo, gpt2-124m, llama-1b, vlm-ocr); throws naming the known ones otherwise.
TransformerConfig model_preset(const std::string& name);

nlohmann::json to_json(const TransformerConfig& c);
TransformerConfig transformer_config_from_json(const nlohmann::json& j);

}  // namespace dtrain

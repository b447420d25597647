// The shape of a vision-language model's vision side (model.vision.*): a ViT encoder over square
// patches, pre-norm blocks with LayerNorm, biases and a GELU MLP, learned row and column positions
// for grids of up to max_grid patches a side, and optionally Qwen2-VL's 2×2 merge of neighbouring
// patches into one image token; then an MLP connector (two layers, GELU) from the merged features
// (d_model·merge²) to the LLM's width. Two token ids the LLM reserves mark images and ends: an
// image's tokens replace its placeholders (image_token_id) in the text, in order: row by row
// (Qwen2-VL's), or column by column (token_order "columns"), which puts a line of text's image
// tokens in the order the text is read.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace dtrain {

struct VisionConfig {
  int n_layer = 4;
  int n_head = 4;
  int d_model = 128;
  int d_ff = 0;               // 0: 4·d_model
  int patch_size = 8;         // pixels a side of one patch
  int channels = 3;
  int max_grid = 32;          // most patches on a side of one image
  int merge = 2;              // 1: a token per patch; 2: a token per 2×2 group of patches
  int image_token_id = 256;   // the placeholder each image token replaces
  int end_token_id = 257;     // ends a sample's text and pads its row
  std::string token_order = "rows";  // "rows" or "columns": the order of an image's tokens in the sequence

  int ff_dim() const { return d_ff > 0 ? d_ff : 4 * d_model; }
  bool columns_first() const { return token_order == "columns"; }
  int64_t patch_values() const { return int64_t(channels) * patch_size * patch_size; }
  // The features of one image token: merge² patches' side by side.
  int64_t merged_dim() const { return int64_t(d_model) * merge * merge; }

  // Throws std::invalid_argument naming the model.vision.* key at fault; the token ids must be
  // distinct and below `vocab_size` (model.vocab_size).
  void validate(int vocab_size) const;

  // Parameters of the encoder's parts: the patch embedding with the row and column tables, one
  // block, the final norm; and of the connector to an LLM `llm_d_model` wide.
  int64_t stem_parameters() const;
  int64_t block_parameters() const;
  int64_t final_norm_parameters() const { return 2 * int64_t(d_model); }
  int64_t connector_parameters(int llm_d_model) const;
  int64_t parameter_count(int llm_d_model) const;
  // The same count in a double, which holds it even where an int64 would overflow.
  double parameter_count_in_double(int llm_d_model) const;
  // Training FLOPs of one image of gh × gw patches through the encoder and the connector: 6 per
  // matmul weight per patch (per image token for the connector) and 12·layers·n·d for attention
  // over the image's n = gh·gw patches (the accounting of TransformerConfig::train_flops_per_token).
  double train_flops_per_image(int64_t gh, int64_t gw, int llm_d_model) const;
  // The connector's part of it: what the image costs when the encoder is frozen and runs forward
  // only (its third of the encoder's part: no backward through it at all).
  double connector_train_flops_per_image(int64_t gh, int64_t gw, int llm_d_model) const;
  std::string describe() const;
};

// Whether a parameter or module of a vision-language model belongs to the vision encoder or the
// connector (vision.*, connector.*), which the LLM's parallelisms leave whole.
bool is_vision_side(const std::string& name);

nlohmann::json to_json(const VisionConfig& v);
VisionConfig vision_config_from_json(const nlohmann::json& j);

}  // namespace dtrain

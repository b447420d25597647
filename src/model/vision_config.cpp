#include "model/vision_config.h"

#include <climits>
#include <sstream>
#include <stdexcept>

namespace dtrain {

void VisionConfig::validate(int vocab_size) const {
  auto fail = [](const std::string& msg) { throw std::invalid_argument(msg); };
  auto at_least = [&](int value, int least, const char* key) {
    if (value < least) fail(std::string("model.vision.") + key + " must be at least " + std::to_string(least) + ", got " + std::to_string(value));
  };
  at_least(n_layer, 1, "n_layer");
  at_least(n_head, 1, "n_head");
  if (d_model < 1 || d_model % n_head != 0)
    fail("model.vision.d_model (" + std::to_string(d_model) + ") must be a positive multiple of model.vision.n_head (" +
         std::to_string(n_head) + ")");
  // ff_dim() and merged_dim() are ints up to 4·d_model.
  if (d_model > INT_MAX / 8) fail("model.vision.d_model (" + std::to_string(d_model) + ") must be at most " + std::to_string(INT_MAX / 8));
  at_least(d_ff, 0, "d_ff");
  at_least(patch_size, 1, "patch_size");
  at_least(channels, 1, "channels");
  if (patch_values() > INT_MAX) fail("model.vision.channels x model.vision.patch_size^2 must be at most " + std::to_string(INT_MAX));
  at_least(max_grid, 1, "max_grid");
  if (merge != 1 && merge != 2) fail("model.vision.merge must be 1 or 2, got " + std::to_string(merge));
  if (max_grid % merge != 0)
    fail("model.vision.max_grid (" + std::to_string(max_grid) + ") must be a multiple of model.vision.merge (" + std::to_string(merge) +
         "): an image's grid divides by the merge");
  for (const auto& [id, key] : {std::pair<int, const char*>{image_token_id, "image_token_id"}, {end_token_id, "end_token_id"}})
    if (id < 0 || id >= vocab_size)
      fail(std::string("model.vision.") + key + " (" + std::to_string(id) + ") must be a token of the vocabulary, below model.vocab_size (" +
           std::to_string(vocab_size) + ")");
  if (token_order != "rows" && token_order != "columns")
    fail("model.vision.token_order must be \"rows\" or \"columns\", got \"" + token_order + "\"");
  if (image_token_id == end_token_id)
    fail("model.vision.image_token_id and model.vision.end_token_id must differ, both are " + std::to_string(image_token_id));
}

namespace {

// The parameters of each part, in T: int64_t for the counts, double for validate() to learn first
// whether a count fits an int64 at all.
template <typename T>
struct VisionSizes {
  T stem, block, final_norm, connector;
  T total(int n_layer) const { return stem + n_layer * block + final_norm + connector; }
};

template <typename T>
VisionSizes<T> vision_sizes(const VisionConfig& v, int llm_d_model) {
  const T d = v.d_model, f = v.ff_dim(), D = llm_d_model, patch = T(v.patch_values()), merged = T(v.merged_dim());
  return {d * patch + d + 2 * T(v.max_grid) * d,  // the patch embedding with its bias, the row and column tables
          4 * d * d + 2 * d * f + 9 * d + f,      // ln1, q, k, v, o, ln2, up, down, with biases
          2 * d,                                  // LayerNorm
          D * merged + D + D * D + D};            // fc1, fc2, with biases
}

}  // namespace

int64_t VisionConfig::stem_parameters() const { return vision_sizes<int64_t>(*this, 0).stem; }
int64_t VisionConfig::block_parameters() const { return vision_sizes<int64_t>(*this, 0).block; }
int64_t VisionConfig::connector_parameters(int llm_d_model) const { return vision_sizes<int64_t>(*this, llm_d_model).connector; }
int64_t VisionConfig::parameter_count(int llm_d_model) const { return vision_sizes<int64_t>(*this, llm_d_model).total(n_layer); }
double VisionConfig::parameter_count_in_double(int llm_d_model) const { return vision_sizes<double>(*this, llm_d_model).total(n_layer); }

double VisionConfig::train_flops_per_image(int64_t gh, int64_t gw, int llm_d_model) const {
  const double n = double(gh) * double(gw), d = d_model, f = ff_dim();
  const double encoder_weights = d * double(patch_values()) + n_layer * (4 * d * d + 2 * d * f);
  return 6.0 * n * encoder_weights + 12.0 * n_layer * n * n * d + connector_train_flops_per_image(gh, gw, llm_d_model);
}

double VisionConfig::connector_train_flops_per_image(int64_t gh, int64_t gw, int llm_d_model) const {
  const double n = double(gh) * double(gw), D = llm_d_model;
  return 6.0 * (n / (merge * merge)) * (D * double(merged_dim()) + D * D);
}

std::string VisionConfig::describe() const {
  std::ostringstream s;
  s << "vision " << n_layer << "L/" << n_head << "H d=" << d_model << " ff=" << ff_dim() << " patch " << patch_size << "x" << patch_size
    << "x" << channels << " grid<=" << max_grid << " merge " << merge << "x" << merge
    << (columns_first() ? ", tokens by columns" : "");
  return s.str();
}

bool is_vision_side(const std::string& name) { return name.rfind("vision.", 0) == 0 || name.rfind("connector.", 0) == 0; }

nlohmann::json to_json(const VisionConfig& v) {
  return {{"n_layer", v.n_layer},         {"n_head", v.n_head},       {"d_model", v.d_model},
          {"d_ff", v.ff_dim()},           {"patch_size", v.patch_size}, {"channels", v.channels},
          {"max_grid", v.max_grid},       {"merge", v.merge},         {"image_token_id", v.image_token_id},
          {"end_token_id", v.end_token_id}, {"token_order", v.token_order}};
}

VisionConfig vision_config_from_json(const nlohmann::json& j) {
  VisionConfig v;
  v.n_layer = j.at("n_layer");
  v.n_head = j.at("n_head");
  v.d_model = j.at("d_model");
  v.d_ff = j.at("d_ff");
  v.patch_size = j.at("patch_size");
  v.channels = j.at("channels");
  v.max_grid = j.at("max_grid");
  v.merge = j.at("merge");
  v.image_token_id = j.at("image_token_id");
  v.end_token_id = j.at("end_token_id");
  v.token_order = j.value("token_order", "rows");  // written since token_order exists; rows before
  return v;
}

}  // namespace dtrain

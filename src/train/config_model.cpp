#include "train/config_model.h"

#include <stdexcept>
#include <utility>
#include <vector>

#include "common/printable.h"
#include "common/printable_json.h"
#include "hf/hf_config.h"
#include "train/config_schema.h"

namespace dtrain {

namespace {

// The model of model.init_from's config.json; a shape key the config gives as well must agree with
// it, except seq_len, which may be shorter than GPT-2's position table (and any length for Llama).
TransformerConfig model_of_init_from(const Reader& r, const std::string& dir) {
  HfModelShape hf;
  try {
    hf = read_hf_model_shape(dir);
  } catch (const std::runtime_error& e) {
    fail(r.origin(), "'model.init_from': " + std::string(e.what()));
  }
  const nlohmann::json from = to_json(hf.config);
  for (const char* key : {"arch", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab_size", "tie_embeddings", "norm_eps", "rope_theta"}) {
    const std::string path = std::string("model.") + key;
    if (r.is_null(path) || r.at(path) == from[key]) continue;
    fail(r.origin(), "'" + path + "' is " + printable_json(r.at(path)) + ", but model.init_from's " + dir + "/" + kHfConfigFile + " gives " +
                         printable_json(from[key]) + ": the model's shape comes from the checkpoint; remove the key");
  }
  return hf.config;
}

// model.vision.*: the vision side of arch "vlm", whose preset or defaults fill what the config
// leaves null; any of them on a text model is an error.
void resolve_vision(const Reader& r, TransformerConfig& m) {
  VisionConfig& v = m.vision;
  const std::vector<std::pair<const char*, int*>> keys = {
      {"n_layer", &v.n_layer}, {"n_head", &v.n_head}, {"d_model", &v.d_model}, {"d_ff", &v.d_ff}, {"patch_size", &v.patch_size},
      {"channels", &v.channels}, {"max_grid", &v.max_grid}, {"merge", &v.merge}, {"image_token_id", &v.image_token_id},
      {"end_token_id", &v.end_token_id}};
  auto given = [&](const std::string& path) {
    if (!r.is_null(path) && !m.is_vlm())
      fail(r.origin(), "'" + path + "' applies to model.arch \"vlm\" only, and the model is \"" + printable(m.arch) + "\"");
    return !r.is_null(path);
  };
  for (const auto& [key, field] : keys)
    if (given(std::string("model.vision.") + key)) *field = r.small_integer(std::string("model.vision.") + key, 0);
  if (given("model.vision.token_order")) v.token_order = r.text("model.vision.token_order");
}

}  // namespace

TransformerConfig resolve_model(const Reader& r) {
  TransformerConfig m;
  const std::string init_from = r.text("model.init_from");
  try {
    m = init_from.empty() ? model_preset(r.text("model.preset")) : model_of_init_from(r, init_from);
  } catch (const std::invalid_argument& e) {
    fail(r.origin(), e.what());
  }
  auto int_key = [&](const char* key, int& field) {
    if (!r.is_null(std::string("model.") + key)) field = r.small_integer(std::string("model.") + key, 0);
  };
  if (!r.is_null("model.arch")) m.arch = r.text("model.arch");
  int_key("n_layer", m.n_layer);
  int_key("n_head", m.n_head);
  int_key("n_kv_head", m.n_kv_head);
  int_key("d_model", m.d_model);
  int_key("d_ff", m.d_ff);
  int_key("seq_len", m.seq_len);
  int_key("vocab_size", m.vocab_size);
  if (!r.is_null("model.tie_embeddings")) m.tie_embeddings = r.boolean("model.tie_embeddings");
  if (!r.is_null("model.norm_eps")) m.norm_eps = r.number("model.norm_eps", 0);
  if (!r.is_null("model.rope_theta")) m.rope_theta = r.number("model.rope_theta", 1);
  resolve_vision(r, m);
  try {
    m.validate();
  } catch (const std::invalid_argument& e) {
    fail(r.origin(), e.what());
  }
  return m;
}

}  // namespace dtrain

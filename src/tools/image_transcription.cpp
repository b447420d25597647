#include "tools/image_transcription.h"

#include <stdexcept>

#include "ckpt/durable_file.h"
#include "data/image_patches.h"
#include "train/training_state.h"
#include "train/vision_language_rules.h"

namespace dtrain {

namespace {

// The data keys of the checkpoint's resolved config (config.json holds every key, defaults included).
TrainConfig data_keys_of(const std::string& checkpoint_dir, const TransformerConfig& model) {
  const nlohmann::json config = read_json_file(checkpoint_dir + "/config.json");
  const nlohmann::json& data = config.at("data");
  TrainConfig c;
  c.model = model;
  c.data_source = data.at("source").get<std::string>();
  c.tokenizer = data.at("tokenizer").get<std::string>();
  c.val_fraction = data.at("val_fraction").get<double>();
  c.max_image_tokens = data.at("max_image_tokens").get<int64_t>();
  c.max_image_pixels = data.at("max_image_pixels").get<int64_t>();
  return c;
}

}  // namespace

ImageTranscriber::ImageTranscriber(const std::string& checkpoint_dir, Tokenizer& tokenizer)
    : model_(load_model(checkpoint_dir)), tokenizer_(tokenizer) {
  const TransformerConfig& model = model_->config();
  if (!model.is_vlm())
    throw std::runtime_error("checkpoint '" + checkpoint_dir + "' holds a text model (model.arch \"" + model.arch +
                             "\"), which reads no image: --image needs a model.arch \"vlm\" checkpoint");
  require_vocab_fits(tokenizer, model.vocab_size, "the checkpoint's model.vocab_size");
  TrainConfig keys;
  try {
    keys = data_keys_of(checkpoint_dir, model);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("checkpoint '" + checkpoint_dir + "/config.json' lacks a data key of a vision-language run: " + e.what());
  }
  options_ = vlm_data_options(keys);
  data_source_ = keys.data_source;
  data_tokenizer_ = keys.tokenizer;
}

ImageBatch ImageTranscriber::load_image(const std::string& path) const {
  const Image image = load_image_file(path, options_.max_image_pixels);
  const PatchGrid grid = fit_patch_grid(image.height, image.width, options_.image);
  return ImageBatch{image_to_patches(image, grid, options_.image.patch_size, options_.image.channels),
                    at::tensor({grid.height, grid.width}, at::kLong).view({1, 2})};
}

std::string ImageTranscriber::transcribe(const ImageBatch& image, const std::string& prompt, const SamplingOptions& options) {
  std::vector<int32_t> ids;
  tokenizer_.encode(prompt, ids);
  return transcribe(image, ids, options);
}

std::string ImageTranscriber::transcribe(const ImageBatch& image, const std::vector<int32_t>& prompt, SamplingOptions options) {
  const RowLayout& row = options_.row;
  std::vector<int64_t> tokens;
  if (image.count() > 1) throw std::invalid_argument("a transcription reads one image, not " + std::to_string(image.count()));
  if (image.count() == 1) {
    const auto g = image.grids.accessor<int64_t, 2>();
    tokens.assign(size_t(image_tokens(PatchGrid{g[0][0], g[0][1]}, options_.image.merge)), row.image_token_id);
  }
  tokens.insert(tokens.end(), prompt.begin(), prompt.end());
  if (tokens.empty()) throw std::invalid_argument("nothing to continue: give --image, or a --prompt that encodes to a token");
  // A placeholder the model wrote would ask for an image it was never given: it ends the text as the end token does.
  options.stop_tokens = {row.end_token_id, row.image_token_id};
  return tokenizer_.decode(sample_tokens(model_, tokens, options, image));
}

}  // namespace dtrain

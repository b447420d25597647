#include "train/vision_language_rules.h"

#include "data/vlm_dataset.h"

#include <string>

namespace dtrain {

void check_vision_language(const Reader& r, const TrainConfig& c) {
  // The other way round is fine: a vision-language model may train on text alone, its vision side
  // taking part with no images.
  if (c.ocr_random_lines > 0 && c.data_source != "ocr")
    fail(c.origin, "'data.ocr_random_lines' (" + std::to_string(c.ocr_random_lines) + ") adds lines to the built-in OCR set, and 'data.source' is \"" +
                       c.data_source + "\", not \"ocr\"; set it 0 or leave it out");
  if (is_vlm_source(c.data_source) && !c.model.is_vlm())
    fail(c.origin, "'data.source' \"" + c.data_source + "\" holds images, which 'model.arch' \"" + c.model.arch +
                       "\" cannot read: train it with model.arch \"vlm\" (e.g. model.preset \"vlm-ocr\")");
  if (!c.model.is_vlm()) return;
  const std::string model = "model.arch \"vlm\"";
  if (c.parallel.pp > 1)
    fail(c.origin, "'parallel.pp' (" + std::to_string(c.parallel.pp) + ") must be 1 for " + model +
                       ": pipeline stages hand on hidden states, not the images a vision-language model's first stage would need; "
                       "shard it with parallel.tp or zero_optimization.stage instead");
  if (c.parallel.cp > 1)
    fail(c.origin, "'parallel.cp' (" + std::to_string(c.parallel.cp) + ") must be 1 for " + model +
                       ": context parallelism would split each sequence, and the places its image tokens take, over the cp ranks");
  if (r.boolean("zero_optimization.stage3_gather_16bit_weights_on_model_save"))
    fail(c.origin, "'zero_optimization.stage3_gather_16bit_weights_on_model_save' exports each save as a Hugging Face GPT-2 or Llama "
                   "model, which a " + model + " is not; set it false");
}

VlmDataOptions vlm_data_options(const TrainConfig& c) {
  VlmDataOptions o;
  const VisionConfig& v = c.model.vision;
  o.row = RowLayout{c.model.seq_len, v.image_token_id, v.end_token_id};
  o.image = PatchOptions{v.patch_size, v.merge, v.max_grid, c.max_image_tokens, v.channels};
  o.max_image_pixels = c.max_image_pixels;
  o.val_fraction = c.val_fraction;
  o.skip_bad_samples = c.skip_bad_samples;
  o.ocr_random_lines = c.ocr_random_lines;
  return o;
}

}  // namespace dtrain

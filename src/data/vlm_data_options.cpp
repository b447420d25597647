#include "data/vlm_data_options.h"

#include <stdexcept>
#include <string>

namespace dtrain {

void validate(const VlmDataOptions& options) {
  validate(options.image);
  auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  if (options.row.seq_len < 1) fail("model.seq_len must be at least 1, got " + std::to_string(options.row.seq_len));
  if (options.row.image_token_id < 0)
    fail("model.vision.image_token_id must not be negative, got " + std::to_string(options.row.image_token_id));
  if (options.row.end_token_id < 0)
    fail("model.vision.end_token_id must not be negative, got " + std::to_string(options.row.end_token_id));
  if (options.row.image_token_id == options.row.end_token_id)
    fail("model.vision.image_token_id and model.vision.end_token_id are both " + std::to_string(options.row.end_token_id) +
         "; an image placeholder and the end of the text need ids of their own");
  if (options.max_image_pixels < 1)
    fail("data.max_image_pixels must be at least 1, got " + std::to_string(options.max_image_pixels));
  if (!(options.val_fraction >= 0 && options.val_fraction < 1))
    fail("data.val_fraction must be in [0, 1), got " + std::to_string(options.val_fraction));
  if (options.ocr_random_lines < 0)
    fail("data.ocr_random_lines must not be negative, got " + std::to_string(options.ocr_random_lines));
  if (options.ocr_lines.min_chars < 1 || options.ocr_lines.max_chars < options.ocr_lines.min_chars)
    fail("the OCR set's line lengths must satisfy 1 <= min <= max, got " + std::to_string(options.ocr_lines.min_chars) + " and " +
         std::to_string(options.ocr_lines.max_chars));
}

}  // namespace dtrain

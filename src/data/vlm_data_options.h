// What a vision-language dataset (data/vlm_dataset.h) is built with: the sizes of the model it feeds
// and the data keys of the config. Each field names the config key the trainer fills it from.
#pragma once
#include <cstdint>

#include "data/ocr_lines.h"
#include "data/patch_grid.h"
#include "data/vlm_row.h"

namespace dtrain {

struct VlmDataOptions {
  RowLayout row;                        // model.seq_len, model.vision.{image_token_id, end_token_id}
  PatchOptions image;                   // model.vision.{patch_size, merge, max_grid, channels}, data.max_image_tokens
  int64_t max_image_pixels = 1 << 24;   // data.max_image_pixels: most pixels (width·height) a decoded image may have
  double val_fraction = 0.05;           // data.val_fraction: the last samples, held out for validation
  bool skip_bad_samples = false;        // data.skip_bad_samples: skip and count bad samples instead of failing
  uint64_t render_seed = 0;             // the OCR set's look: each line's style derives from it and the line
  OcrLineBounds ocr_lines;              // the OCR set's line lengths
  int64_t ocr_random_lines = 0;         // data.ocr_random_lines: lines of random characters added to the OCR set's training lines
};

// Throws std::invalid_argument naming the config key that is out of range.
void validate(const VlmDataOptions& options);

}  // namespace dtrain

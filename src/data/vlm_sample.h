// One vision-language sample as a dataset holds it between load and batch: its tokens, and where its
// image comes from (a file, decoded again for each batch, or a rendered text line), with the patch
// grid the image was given at load, which fixes its number of placeholder tokens in the row.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/image_decode.h"
#include "data/patch_grid.h"
#include "data/tokenizer.h"
#include "data/vlm_data_options.h"

namespace dtrain {

enum class ImageOrigin { None, File, RenderedText };

struct VlmSample {
  std::string origin;            // where the sample was read, for messages: "data/train.jsonl line 12"
  std::string text;              // what the model must produce
  std::vector<int32_t> tokens;   // the prompt's ids, then the text's
  size_t prompt_tokens = 0;
  ImageOrigin image = ImageOrigin::None;
  std::string image_path;        // ImageOrigin::File: the file, as opened
  uint64_t render_seed = 0;      // ImageOrigin::RenderedText: the line's style (data/text_line_renderer.h)
  ImageSize image_size;          // the image's pixels when loaded: a file that changed since is an error
  PatchGrid grid;                // the image's patches; empty without an image
};

// Sets `sample`'s image size and grid (for an image of `size`) and its tokens (of `prompt`, then of
// sample.text, by `tokenizer` or as bytes when it is null), then checks that the sample fits a row.
// Throws std::runtime_error saying what is wrong, without the sample's origin: the caller adds it.
void place_sample(VlmSample& sample, ImageSize size, std::string_view prompt, const VlmDataOptions& options,
                  Tokenizer* tokenizer);

// The image tokens the sample's row holds.
int64_t image_tokens(const VlmSample& sample, const VlmDataOptions& options);

// The samples a source gave, and what it left out.
struct SampleSet {
  std::vector<VlmSample> samples;
  int64_t training_only = 0;   // samples at the front that are never held out (and leave the split of the rest as it was)
  int64_t skipped = 0;         // bad samples left out under data.skip_bad_samples
  std::string first_skipped;   // the first of them, where it was and what was wrong
  std::string description;     // for logs: what was read
  std::string warning;         // non-empty when a fallback was taken
};

}  // namespace dtrain

// How many patches an image becomes: its size in patches, chosen so that its tokens fit the budget
// of one image while its aspect ratio is kept. The vision encoder cuts an image into square patches
// of patch_size pixels and, with merge m = 2, joins each 2x2 group of neighbouring patches into one
// token (Qwen2-VL), so a grid of gh x gw patches gives (gh/m)·(gw/m) image tokens; gh and gw are
// always multiples of m.
#pragma once
#include <cstdint>

namespace dtrain {

struct PatchOptions {
  int patch_size = 14;              // model.vision.patch_size: pixels per patch side
  int merge = 1;                    // model.vision.merge: 1, or 2 for 2x2 merging
  int max_grid = 32;                // model.vision.max_grid: most patches per side
  int64_t max_image_tokens = 256;   // data.max_image_tokens: most tokens (after merging) per image
  int channels = 3;                 // model.vision.channels: 3 (RGB), or 1 (grey)
};

// Throws std::invalid_argument naming the config key that is out of range.
void validate(const PatchOptions& options);

struct PatchGrid {
  int64_t height = 0, width = 0;  // in patches
  int64_t patches() const { return height * width; }
};

// The grid of an image of `height` x `width` pixels: the image's own size in patches, rounded to
// multiples of merge, when that fits; otherwise scaled down, aspect kept, until it holds at most
// max_image_tokens tokens and max_grid patches a side. Never less than merge patches a side, so an
// image a few pixels high (a line of text) still has a row; there, and where one side alone would
// pass max_grid, the aspect ratio gives. Images are never enlarged past rounding.
PatchGrid fit_patch_grid(int64_t height, int64_t width, const PatchOptions& options);

// The tokens that a grid takes in the sequence once its patches are merged.
int64_t image_tokens(PatchGrid grid, int merge);

}  // namespace dtrain

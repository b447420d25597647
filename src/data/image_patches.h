// An image as the vision encoder reads it: resized to its patch grid (data/patch_grid.h), pixels
// scaled from [0, 255] to [-1, 1] and then standardized over the image (mean 0, standard deviation
// 1; a flat image all 0), cut into square patches. Standardizing makes the patches of a line of text
// independent of its paper's brightness and its ink's contrast.
//
// Layout of the result, float32 [gh·gw, channels·p·p] for a grid of gh x gw patches of p pixels:
//   - patch row index  = r·gw + c for the patch at grid row r, column c (row-major, top left first);
//   - inside a patch, channel-major: value (ch, y, x) sits at column ch·p·p + y·p + x, for channel ch
//     (R, G, B; or the one grey channel), pixel row y and column x inside the patch.
// So row k of the result reshapes to [channels, p, p], the layout of a Conv2d's input window: a patch
// embedding is that convolution's weight, flattened the same way, applied to each row.
#pragma once
#include <ATen/ATen.h>

#include "data/image_decode.h"
#include "data/patch_grid.h"

namespace dtrain {

// `image` (grey or RGB) resized to grid.height·patch_size x grid.width·patch_size pixels and cut as
// above, with `channels` channels: a grey image's channel repeated for RGB, an RGB image's luminance
// (ITU-R BT.601) for grey.
at::Tensor image_to_patches(const Image& image, PatchGrid grid, int patch_size, int channels);

}  // namespace dtrain

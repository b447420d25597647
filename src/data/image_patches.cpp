#include "data/image_patches.h"

#include <stb_image_resize.h>

#include <stdexcept>
#include <vector>

namespace dtrain {

namespace {

// `image` at `width` x `height` pixels, its channels unchanged. stb_image_resize filters each axis
// (Mitchell when shrinking, Catmull-Rom when enlarging), so a shrunk line of text keeps its strokes.
Image resized(const Image& image, int width, int height) {
  if (image.width == width && image.height == height) return image;
  Image out{width, height, image.channels, std::vector<uint8_t>(size_t(width) * size_t(height) * size_t(image.channels))};
  if (!stbir_resize_uint8(image.pixels.data(), image.width, image.height, 0, out.pixels.data(), width, height, 0,
                          image.channels))
    throw std::runtime_error("stb_image_resize could not resize a " + std::to_string(image.width) + "x" +
                             std::to_string(image.height) + " image to " + std::to_string(width) + "x" + std::to_string(height));
  return out;
}

// The value of channel `ch` (of `channels` wanted) of the pixel at `px`, in [-1, 1].
float channel_value(const uint8_t* px, int image_channels, int channels, int ch) {
  float v;
  if (image_channels == channels) {
    v = px[ch];
  } else if (image_channels == 1) {
    v = px[0];
  } else {
    v = 0.299f * px[0] + 0.587f * px[1] + 0.114f * px[2];
  }
  return v / 127.5f - 1.0f;
}

// `values` shifted and scaled to mean 0 and standard deviation 1 over the whole image (a flat image
// becomes all zeros). Without this, a line of text is a large, nearly constant paper level that varies
// from image to image with a little ink on it: the encoder's patch embedding then spends its early
// training on the paper level, and a small model learns the language of the lines long before it
// learns to read them (docs/decisions.md, "Reading the OCR set").
at::Tensor standardized(const at::Tensor& values) {
  const at::Tensor centred = values - values.mean();
  const double spread = centred.square().mean().sqrt().item<double>();
  return spread > 1e-6 ? centred / spread : centred;
}

}  // namespace

at::Tensor image_to_patches(const Image& image, PatchGrid grid, int patch_size, int channels) {
  const int64_t p = patch_size;
  const Image pixels = resized(image, int(grid.width * p), int(grid.height * p));
  auto patches = at::empty({grid.patches(), channels * p * p}, at::kFloat);
  float* out = patches.data_ptr<float>();
  const int64_t row_bytes = int64_t(pixels.width) * pixels.channels;
  for (int64_t r = 0; r < grid.height; ++r)
    for (int64_t c = 0; c < grid.width; ++c)
      for (int ch = 0; ch < channels; ++ch)
        for (int64_t y = 0; y < p; ++y) {
          const uint8_t* px = pixels.pixels.data() + (r * p + y) * row_bytes + c * p * pixels.channels;
          for (int64_t x = 0; x < p; ++x, px += pixels.channels) *out++ = channel_value(px, pixels.channels, channels, ch);
        }
  return standardized(patches);
}

}  // namespace dtrain

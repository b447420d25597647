// Image files decoded by stb_image (Debian's libstb): PNG and JPEG, and the other formats it reads
// (BMP, TGA, GIF's first frame, PNM). Decoding keeps what the vision encoder needs: 8-bit pixels,
// grey when the file is grey and RGB otherwise, transparency laid over white (text drawn on a
// transparent background reads as it would on paper).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct Image {
  int width = 0, height = 0;
  int channels = 0;             // 1 (grey) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height rows of width pixels, each `channels` bytes, top row first
};

struct ImageSize {
  int width = 0, height = 0;
  int64_t pixels() const { return int64_t(width) * height; }
};

// The size the image in `bytes` declares, read from its header only. Throws std::runtime_error saying
// why when `bytes` is no image stb_image reads.
ImageSize read_image_size(const std::string& bytes);

// Throws std::runtime_error with stb_image's reason when `bytes` do not decode (a truncated or
// damaged file passes read_image_size and fails here).
Image decode_image(const std::string& bytes);

// The image file at `path`, checked against `max_pixels` (data.max_image_pixels) before it is
// decoded, so an oversized file never takes its decoded size in memory. Throws std::runtime_error
// naming `path`: missing or not a regular file, not an image, larger than allowed, not decodable.
Image load_image_file(const std::string& path, int64_t max_pixels);

}  // namespace dtrain

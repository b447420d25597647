#include "data/image_decode.h"

#include <stb_image.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

#include "common/printable.h"
#include "common/regular_file.h"

namespace dtrain {

namespace {

const stbi_uc* data_of(const std::string& bytes) { return reinterpret_cast<const stbi_uc*>(bytes.data()); }

// stb_image takes an int length; a file past 2 GiB is no image it could decode anyway.
int length_of(const std::string& bytes) {
  if (bytes.size() > size_t(INT32_MAX)) throw std::runtime_error("is larger than the 2 GiB stb_image reads");
  return int(bytes.size());
}

std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  return reason ? reason : "unknown reason";
}

}  // namespace

ImageSize read_image_size(const std::string& bytes) {
  ImageSize size;
  int channels = 0;
  if (!stbi_info_from_memory(data_of(bytes), length_of(bytes), &size.width, &size.height, &channels))
    throw std::runtime_error("is not an image stb_image reads (" + stb_reason() + ")");
  return size;
}

Image decode_image(const std::string& bytes) {
  Image image;
  int file_channels = 0;
  if (!stbi_info_from_memory(data_of(bytes), length_of(bytes), &image.width, &image.height, &file_channels))
    throw std::runtime_error("is not an image stb_image reads (" + stb_reason() + ")");
  // Grey files (with or without alpha) stay grey; everything else becomes RGB. Alpha is always asked
  // for, so that transparency can be laid over white below.
  image.channels = file_channels <= 2 ? 1 : 3;
  const int loaded = image.channels + 1;
  int width = 0, height = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(data_of(bytes), length_of(bytes), &width, &height, &file_channels, loaded), stbi_image_free);
  if (!pixels) throw std::runtime_error("cannot be decoded (" + stb_reason() + ")");
  image.width = width;
  image.height = height;
  const size_t count = size_t(width) * size_t(height);
  image.pixels.resize(count * size_t(image.channels));
  const stbi_uc* in = pixels.get();
  uint8_t* out = image.pixels.data();
  for (size_t i = 0; i < count; ++i, in += loaded) {
    const int alpha = in[image.channels];
    for (int c = 0; c < image.channels; ++c) *out++ = uint8_t((in[c] * alpha + 255 * (255 - alpha) + 127) / 255);
  }
  return image;
}

Image load_image_file(const std::string& path, int64_t max_pixels) {
  const std::string name = "image '" + printable(path) + "' ";
  FileContents file = read_regular_file(path);
  if (!file.problem.empty()) throw std::runtime_error(name + file.problem);
  try {
    const ImageSize size = read_image_size(file.bytes);
    if (size.pixels() > max_pixels)
      throw std::runtime_error("is " + std::to_string(size.width) + "x" + std::to_string(size.height) + " = " +
                               std::to_string(size.pixels()) + " pixels, above data.max_image_pixels " + std::to_string(max_pixels));
    return decode_image(file.bytes);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(name + e.what());
  }
}

}  // namespace dtrain

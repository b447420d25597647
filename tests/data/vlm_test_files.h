// Files the vision-language data tests read: small PNG and JPEG images written with stb_image_write
// (Debian's libstb), jsonl files, and a fortunes folder standing in for the built-in corpus.
#pragma once
#include <stb_image_write.h>
#include <stdlib.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain::test {

// Pixels of a width x height image with `channels` channels, every pixel `value` (one per channel).
inline std::vector<uint8_t> solid_pixels(int width, int height, std::vector<uint8_t> value) {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < width * height; ++i) pixels.insert(pixels.end(), value.begin(), value.end());
  return pixels;
}

inline void write_png(const std::string& path, int width, int height, int channels, const std::vector<uint8_t>& pixels) {
  if (!stbi_write_png(path.c_str(), width, height, channels, pixels.data(), width * channels))
    throw std::runtime_error("cannot write " + path);
}

inline void write_jpg(const std::string& path, int width, int height, int channels, const std::vector<uint8_t>& pixels) {
  if (!stbi_write_jpg(path.c_str(), width, height, channels, pixels.data(), 95)) throw std::runtime_error("cannot write " + path);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Points the built-in corpus at `dir` while it lives.
class FortunesDir {
 public:
  explicit FortunesDir(const std::string& dir) { ::setenv("DTRAIN_FORTUNES_DIR", dir.c_str(), 1); }
  ~FortunesDir() { ::unsetenv("DTRAIN_FORTUNES_DIR"); }
  FortunesDir(const FortunesDir&) = delete;
  FortunesDir& operator=(const FortunesDir&) = delete;
};

}  // namespace dtrain::test

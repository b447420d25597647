#include "ckpt/file_checksum.h"

#define XXH_INLINE_ALL  // header-only: nothing to link, the hash inlines into the read loop
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace dtrain {

struct Checksum::State {
  XXH3_state_t xxh3;
};

Checksum::Checksum() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->xxh3); }

Checksum::~Checksum() = default;

void Checksum::update(const void* bytes, size_t n) { XXH3_64bits_update(&state_->xxh3, bytes, n); }

std::string Checksum::hex() const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(&state_->xxh3)));
  return hex;
}

std::string file_checksum(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
  Checksum sum;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) sum.update(buf.data(), n);
  if (std::ferror(f.get())) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
  return sum.hex();
}

}  // namespace dtrain

#include "data/token_stream.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/regular_file.h"

namespace dtrain {

std::shared_ptr<const TokenBytes> TokenBytes::map(const std::string& path) {
  if (std::string problem = regular_file_problem(path); !problem.empty()) throw std::runtime_error(problem);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot be read: " + why);
  }
  std::shared_ptr<TokenBytes> bytes(new TokenBytes);
  bytes->size_ = size_t(st.st_size);
  if (bytes->size_ > 0) {
    void* p = ::mmap(nullptr, bytes->size_, PROT_READ, MAP_SHARED, fd, 0);
    const int saved = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("cannot be mapped: ") + std::strerror(saved));
    bytes->mapping_ = p;
    bytes->data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  return bytes;
}

std::shared_ptr<const TokenBytes> TokenBytes::hold(std::string text) {
  std::shared_ptr<TokenBytes> bytes(new TokenBytes);
  bytes->held_ = std::move(text);
  bytes->data_ = reinterpret_cast<const uint8_t*>(bytes->held_.data());
  bytes->size_ = bytes->held_.size();
  return bytes;
}

TokenBytes::~TokenBytes() {
  if (mapping_) ::munmap(mapping_, size_);
}

void TokenBytes::release(size_t offset, size_t bytes) const {
  if (!mapping_ || bytes == 0) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page, end = std::min(size_, offset + bytes);
  // The mapping is read-only and shared: its pages are the file's, and dropping them loses nothing.
  ::madvise(static_cast<char*>(mapping_) + begin, end - begin, MADV_DONTNEED);
}

TokenStream TokenStream::of_text(std::string text) {
  TokenStream s;
  const int64_t count = int64_t(text.size());
  s.append(TokenBytes::hold(std::move(text)), 0, count, 1);
  return s;
}

void TokenStream::append(std::shared_ptr<const TokenBytes> bytes, size_t offset, int64_t count, int width) {
  if (count == 0) return;
  pieces_.push_back({std::move(bytes), offset, count, width, size_});
  size_ += count;
}

void TokenStream::read(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > size_)
    throw std::out_of_range("tokens " + std::to_string(start) + "+" + std::to_string(count) + " of a stream of " + std::to_string(size_));
  auto piece = std::upper_bound(pieces_.begin(), pieces_.end(), start, [](int64_t at, const Piece& p) { return at < p.start; });
  for (--piece; count > 0; ++piece) {
    const int64_t first = start - piece->start, n = std::min(count, piece->count - first);
    const uint8_t* p = piece->bytes->data() + piece->offset + size_t(first) * size_t(piece->width);
    if (piece->width == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = p[i];
    } else if (piece->width == 2) {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t token;
        std::memcpy(&token, p + 2 * i, 2);
        out[i] = token;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        uint32_t token;
        std::memcpy(&token, p + 4 * i, 4);
        out[i] = token;
      }
    }
    out += n, start += n, count -= n;
  }
}

int64_t TokenStream::max_possible_token() const {
  int width = 1;
  for (const auto& p : pieces_) width = std::max(width, p.width);
  return (int64_t(1) << (8 * width)) - 1;
}

int64_t TokenStream::max_token() const {
  constexpr int64_t kChunk = 1 << 16;  // tokens converted, checked and released at a time
  std::vector<int64_t> tokens(size_t(std::min(kChunk, size_)));
  int64_t max = 0;
  for (const auto& p : pieces_) {
    for (int64_t first = 0; first < p.count; first += kChunk) {
      const int64_t n = std::min(kChunk, p.count - first);
      read(p.start + first, n, tokens.data());
      max = std::max(max, *std::max_element(tokens.begin(), tokens.begin() + n));
      p.bytes->release(p.offset + size_t(first) * size_t(p.width), size_t(n) * size_t(p.width));
    }
  }
  return max;
}

}  // namespace dtrain

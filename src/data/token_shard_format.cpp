#include "data/token_shard_format.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/printable.h"

namespace dtrain {

namespace {

[[noreturn]] void fail_on(const std::string& path, const char* what) {
  throw std::runtime_error("shard '" + printable(path) + "' cannot be " + what + ": " + std::strerror(errno));
}

std::string shard_name(const std::string& dir, const std::string& prefix, size_t index) {
  char number[16];
  std::snprintf(number, sizeof number, "%06zu", index);
  return dir + "/" + prefix + "_" + number + ".bin";
}

}  // namespace

ShardFormat shard_format_for(int64_t vocab_size) { return vocab_size <= 65536 ? kUint16Shard : kUint32Shard; }

TokenShardWriter::TokenShardWriter(std::string dir, std::string prefix, ShardFormat format, int64_t shard_tokens)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), format_(format), shard_tokens_(shard_tokens) {}

TokenShardWriter::~TokenShardWriter() {
  if (file_) {  // an unfinished shard (an error on the way) is not left behind as if it were data
    std::fclose(file_);
    std::remove((path_ + ".tmp").c_str());
  }
}

void TokenShardWriter::open_shard() {
  path_ = shard_name(dir_, prefix_, written_.size());
  file_ = std::fopen((path_ + ".tmp").c_str(), "wb");
  if (!file_) fail_on(path_ + ".tmp", "created");
  const std::vector<char> header(kShardHeaderBytes, 0);  // its count is written once the shard is full
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size()) fail_on(path_ + ".tmp", "written");
  in_shard_ = 0;
}

void TokenShardWriter::close_shard() {
  const int32_t header[3] = {format_.magic, format_.version, int32_t(in_shard_)};
  const std::string tmp = path_ + ".tmp";
  if (std::fseek(file_, 0, SEEK_SET) != 0 || std::fwrite(header, sizeof header, 1, file_) != 1) fail_on(tmp, "written");
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) fail_on(tmp, "written");
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) fail_on(path_, "renamed into place");
  written_.push_back(path_);
}

void TokenShardWriter::write(const std::vector<int32_t>& ids) {
  for (size_t from = 0; from < ids.size();) {
    if (!file_) open_shard();
    const size_t n = size_t(std::min<int64_t>(int64_t(ids.size() - from), shard_tokens_ - in_shard_));
    buffer_.resize(n * size_t(format_.width));
    for (size_t i = 0; i < n; ++i) {
      if (format_.width == 2) {
        const uint16_t id = uint16_t(ids[from + i]);
        std::memcpy(&buffer_[2 * i], &id, 2);
      } else {
        const uint32_t id = uint32_t(ids[from + i]);
        std::memcpy(&buffer_[4 * i], &id, 4);
      }
    }
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) fail_on(path_ + ".tmp", "written");
    in_shard_ += int64_t(n), total_ += int64_t(n), from += n;
    if (in_shard_ == shard_tokens_) close_shard();
  }
}

std::vector<std::string> TokenShardWriter::finish() {
  if (file_) close_shard();
  return written_;
}

}  // namespace dtrain

// The corpus as one stream of token ids, read in place. Text files (a byte per token) and token
// shards (a uint16 per token) are mapped read-only and converted to ids a window at a time, so what
// a rank holds does not grow with the corpus: the pages it reads are the kernel's page cache, shared
// by the ranks of a node and dropped again under memory pressure (they are clean), never the
// process's own memory. Pieces are concatenated in order; a window may span two.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtrain {

// Bytes a stream reads from: a regular file mapped read-only, or text held in memory.
class TokenBytes {
 public:
  // Maps `path` (an empty file maps to no bytes); throws std::runtime_error whose message is worded
  // to follow the file's name ("is a directory", "cannot be read: ...").
  static std::shared_ptr<const TokenBytes> map(const std::string& path);
  static std::shared_ptr<const TokenBytes> hold(std::string text);
  ~TokenBytes();
  TokenBytes(const TokenBytes&) = delete;
  TokenBytes& operator=(const TokenBytes&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops this process's mapping of the pages holding [offset, offset + bytes) of a mapped file (a
  // later read maps them again from the page cache): a pass over the whole corpus stays out of RSS.
  void release(size_t offset, size_t bytes) const;

 private:
  TokenBytes() = default;
  std::string held_;
  void* mapping_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class TokenStream {
 public:
  // A stream of `text`'s bytes, held in memory (the built-in corpus, tests).
  static TokenStream of_text(std::string text);
  // Appends `count` tokens of `width` bytes (1: a byte; 2: a uint16 in host order, as nanoGPT and
  // llm.c write them; 4: a uint32, llm.c's Llama 3 shards) starting at `offset` of `bytes`.
  void append(std::shared_ptr<const TokenBytes> bytes, size_t offset, int64_t count, int width);

  int64_t size() const { return size_; }
  // Tokens [start, start + count) into `out`.
  void read(int64_t start, int64_t count, int64_t* out) const;
  // The largest id the pieces' widths can hold (255, 65535 or 2^32-1): no token can exceed it.
  int64_t max_possible_token() const;
  // The largest token, reading the whole stream once.
  int64_t max_token() const;

 private:
  struct Piece {
    std::shared_ptr<const TokenBytes> bytes;
    size_t offset;
    int64_t count;
    int width;
    int64_t start;  // of its first token in the stream
  };
  std::vector<Piece> pieces_;
  int64_t size_ = 0;
};

}  // namespace dtrain

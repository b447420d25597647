// llm.c's token shard files, which `bin:` reads and `dtrain prepare` writes: a header of 256 int32
// (magic, version, token count, then zeros) and the tokens in host order. GPT-2-sized vocabularies
// take uint16 tokens (magic 20240520, version 1); larger ones, Llama 3's 128256, uint32 (magic
// 20240801, version 7), as llm.c's own data scripts write them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dtrain {

struct ShardFormat {
  int32_t magic;
  int32_t version;
  int width;  // bytes per token
};
constexpr ShardFormat kUint16Shard{20240520, 1, 2};
constexpr ShardFormat kUint32Shard{20240801, 7, 4};
constexpr size_t kShardHeaderBytes = 256 * sizeof(int32_t);

// The narrowest format whose tokens hold every id below `vocab_size`.
ShardFormat shard_format_for(int64_t vocab_size);

// Writes ids into numbered shards DIR/PREFIX_000000.bin, ... of at most `shard_tokens` tokens each,
// streaming to disk: a shard appears under its name (renamed from a .tmp) only once complete.
class TokenShardWriter {
 public:
  TokenShardWriter(std::string dir, std::string prefix, ShardFormat format, int64_t shard_tokens);
  ~TokenShardWriter();
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  void write(const std::vector<int32_t>& ids);
  // Completes the last shard; returns every shard's path. Throws std::runtime_error naming the file
  // when the disk refuses a write.
  std::vector<std::string> finish();
  int64_t tokens() const { return total_; }

 private:
  void open_shard();
  void close_shard();

  std::string dir_, prefix_;
  ShardFormat format_;
  int64_t shard_tokens_;
  std::FILE* file_ = nullptr;
  std::string path_;
  int64_t in_shard_ = 0, total_ = 0;
  std::vector<std::string> written_;
  std::vector<uint8_t> buffer_;  // one write()'s ids at the shard's width
};

}  // namespace dtrain

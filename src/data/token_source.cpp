#include "data/token_source.h"

#include <glob.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/byte_words.h"
#include "common/printable.h"
#include "data/builtin_corpus.h"
#include "data/text_tokenization.h"
#include "data/token_shard_format.h"

namespace dtrain {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error("data.source: " + msg); }

std::shared_ptr<const TokenBytes> map_file(const std::string& what, const std::string& path) {
  try {
    return TokenBytes::map(path);
  } catch (const std::runtime_error& e) {
    fail(what + " '" + printable(path) + "' " + e.what());
  }
}

// `text`'s ids by `tokenizer`, held at the width of a shard of its vocabulary.
TokenStream tokenized(std::string_view text, Tokenizer& tokenizer, std::string& description) {
  const int width = shard_format_for(tokenizer.vocab_size()).width;
  std::string held;
  int64_t count = 0;
  tokenize_text(text, tokenizer, [&](const std::vector<int32_t>& ids, size_t) {
    held.resize(held.size() + ids.size() * size_t(width));
    char* at = held.data() + size_t(count) * size_t(width);
    for (const int32_t id : ids) {
      const uint32_t wide = uint32_t(id);
      const uint16_t narrow = uint16_t(id);
      std::memcpy(at, width == 2 ? static_cast<const void*>(&narrow) : &wide, size_t(width));
      at += width;
    }
    count += int64_t(ids.size());
  });
  description += ", " + std::to_string(count) + " tokens by " + tokenizer.description();
  TokenStream tokens;
  tokens.append(TokenBytes::hold(std::move(held)), 0, count, width);
  return tokens;
}

TokenSource load_builtin(Tokenizer* tokenizer) {
  BuiltinCorpus corpus = read_builtin_corpus();
  std::string description = corpus.name + " (" + corpus.detail;
  TokenStream tokens = tokenizer ? tokenized(corpus.text, *tokenizer, description) : TokenStream::of_text(std::move(corpus.text));
  return {tokens, description + ")", corpus.warning};
}

TokenSource load_text(const std::string& path, Tokenizer* tokenizer) {
  auto text = map_file("text file", path);
  if (text->size() < 2)  // one token pair (input, target) at the least
    fail("text file '" + printable(path) + "' " + (text->size() == 0 ? "is empty" : "holds 1 byte; at least 2 are needed"));
  std::string description = "text file " + printable(path) + " (" + byte_words(double(text->size()));
  if (!tokenizer) {
    TokenSource source{{}, description + ")", ""};
    source.tokens.append(text, 0, int64_t(text->size()), 1);
    return source;
  }
  TokenStream tokens = tokenized({reinterpret_cast<const char*>(text->data()), text->size()}, *tokenizer, description);
  text->release(0, text->size());
  if (tokens.size() < 2) fail("text file '" + printable(path) + "' tokenizes to " + std::to_string(tokens.size()) + " token; at least 2 are needed");
  return {tokens, description + ")", ""};
}

// One shard: llm.c's layout (data/token_shard_format.h: a 256 int32 header, then uint16 or uint32
// tokens) or nanoGPT's (uint16 tokens only).
void append_shard(const std::string& path, TokenStream& out) {
  const auto bytes = map_file("shard", path);
  const std::string shard = "shard '" + printable(path) + "'";
  size_t offset = 0, count = bytes->size() / 2;
  int32_t header[3] = {0, 0, 0};
  if (bytes->size() >= 1024) std::memcpy(header, bytes->data(), sizeof header);
  const ShardFormat format = header[0] == kUint32Shard.magic ? kUint32Shard : kUint16Shard;
  if (header[0] == format.magic) {
    if (header[1] != format.version)
      fail(shard + " has llm.c version " + std::to_string(header[1]) + " (" + std::to_string(format.version) + " expected)");
    // Checked before it becomes a size_t: -1 would wrap to a count whose byte size wraps past the check below.
    if (header[2] < 0) fail(shard + " is damaged: its header promises " + std::to_string(header[2]) + " tokens");
    offset = 1024;
    count = size_t(header[2]);
    const size_t width = size_t(format.width);
    if (bytes->size() < offset + width * count)
      fail(shard + " is truncated: its header promises " + std::to_string(count) + " tokens, the file holds " +
           std::to_string((bytes->size() - offset) / width));
  } else if (bytes->size() % 2 != 0) {
    fail(shard + " has an odd size; uint16 tokens expected");
  }
  out.append(bytes, offset, int64_t(count), header[0] == kUint32Shard.magic ? 4 : 2);
}

TokenSource load_bin(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  ::globfree(&g);
  if (files.empty()) fail("no token shard matches '" + printable(pattern) + "'");
  TokenStream tokens;
  for (const auto& f : files) append_shard(f, tokens);
  if (tokens.size() < 2) fail("the shards matching '" + printable(pattern) + "' hold fewer than 2 tokens");
  return {tokens, std::to_string(files.size()) + " token shard(s) matching " + printable(pattern) + " (" + std::to_string(tokens.size()) + " tokens)", ""};
}

}  // namespace

TokenSource load_tokens(const std::string& source, Tokenizer* tokenizer) {
  if (source == "builtin") return load_builtin(tokenizer);
  if (source.rfind("text:", 0) == 0) return load_text(source.substr(5), tokenizer);
  if (source.rfind("bin:", 0) == 0) return load_bin(source.substr(4));
  fail("\"" + printable(source) + "\" is not one of \"builtin\", \"text:PATH\", \"bin:GLOB\"");
}

}  // namespace dtrain

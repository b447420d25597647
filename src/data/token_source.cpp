#include "data/token_source.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/byte_words.h"
#include "common/printable.h"
#include "common/regular_file.h"
#include "data/text_tokenization.h"
#include "data/token_shard_format.h"

namespace dtrain {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error("data.source: " + msg); }

// `what` names the file's role in messages: "text file", "shard".
std::string read_file(const std::string& what, const std::string& path) {
  FileContents file = read_regular_file(path);
  if (!file.problem.empty()) fail(what + " '" + printable(path) + "' " + file.problem);
  return std::move(file.bytes);
}

std::shared_ptr<const TokenBytes> map_file(const std::string& what, const std::string& path) {
  try {
    return TokenBytes::map(path);
  } catch (const std::runtime_error& e) {
    fail(what + " '" + printable(path) + "' " + e.what());
  }
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Sentences from a fixed vocabulary, so a machine without the fortunes package still trains on
// something with structure to learn.
std::string synthetic_corpus() {
  const char* subjects[] = {"The cat", "A dog", "The old man", "My friend", "The computer", "A small bird"};
  const char* verbs[] = {"sees", "likes", "finds", "remembers", "builds", "follows"};
  const char* objects[] = {"the river.", "a red house.", "the quiet road.", "an open door.", "the morning sun."};
  std::string text;
  uint64_t x = 42;
  auto next = [&x](int n) { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return int((x >> 33) % n); };
  while (text.size() < (1u << 20)) {
    text += subjects[next(6)];
    text += ' ';
    text += verbs[next(6)];
    text += ' ';
    text += objects[next(5)];
    text += next(4) == 0 ? "\n" : " ";
  }
  return text;
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
  const std::string dir = builtin_corpus_dir();
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      auto ends = [&name](const char* suffix) {
        size_t n = std::strlen(suffix);
        return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
      };
      if (name[0] == '.' || ends(".dat") || ends(".u8")) continue;
      if (is_regular_file(dir + "/" + name)) files.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::string description = "built-in synthetic corpus (1 MB";
    const std::string text = synthetic_corpus();
    TokenStream tokens = tokenizer ? tokenized(text, *tokenizer, description) : TokenStream::of_text(text);
    TokenSource s{tokens, description + ")",
                  "the fortunes package is missing (no text in " + dir +
                      "); training on a synthetic corpus instead (scripts/setup.sh installs fortunes)"};
    return s;
  }
  // Fortune files separate entries with lines holding only "%"; a blank line reads better.
  std::string text;
  for (const auto& f : files) {
    std::istringstream lines(read_file("fortune file", f));
    for (std::string line; std::getline(lines, line);) text += (line == "%" ? "" : line) + "\n";
  }
  std::string description = "built-in corpus (" + std::to_string(files.size()) + " fortune files, " + byte_words(text.size());
  TokenStream tokens = tokenizer ? tokenized(text, *tokenizer, description) : TokenStream::of_text(std::move(text));
  return {tokens, description + ")", ""};
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

std::string builtin_corpus_dir() {
  const char* dir = std::getenv("DTRAIN_FORTUNES_DIR");
  return dir && *dir ? dir : "/usr/share/games/fortunes";
}

TokenSource load_tokens(const std::string& source, Tokenizer* tokenizer) {
  if (source == "builtin") return load_builtin(tokenizer);
  if (source.rfind("text:", 0) == 0) return load_text(source.substr(5), tokenizer);
  if (source.rfind("bin:", 0) == 0) return load_bin(source.substr(4));
  fail("\"" + printable(source) + "\" is not one of \"builtin\", \"text:PATH\", \"bin:GLOB\"");
}

}  // namespace dtrain

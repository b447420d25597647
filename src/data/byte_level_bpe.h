// Byte-level BPE (GPT-2, Llama 3): text is cut into pre-tokens (data/pretoken_split.h), each
// pre-token's bytes become symbols (each byte spelled as one printable character, GPT-2's
// bytes_to_unicode, which is how the vocabulary writes them), and adjacent symbols merge, lowest
// merge rank first and leftmost among equals, until no pair of them has a merge. Added tokens
// (<|endoftext|>, <|begin_of_text|>, ...) are cut out of the text first and keep their own ids.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/pretoken_split.h"
#include "data/tokenizer.h"

namespace dtrain {

// What a tokenizer.json says, with vocabulary and merges in the vocabulary's own spelling.
struct ByteLevelBpeSpec {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, first merges first
  std::vector<std::pair<std::string, int32_t>> added_tokens;
  SplitPattern split = SplitPattern::Gpt2;
  bool add_prefix_space = false;  // a space before text that does not start with one
  bool ignore_merges = false;     // a pre-token that is a vocabulary entry as a whole is that entry
};

class ByteLevelBpe : public Tokenizer {
 public:
  // Throws std::invalid_argument when the spec is inconsistent (a merge of unknown symbols, a byte
  // with no symbol); `name` is the file, for description().
  ByteLevelBpe(const ByteLevelBpeSpec& spec, std::string name);

  void encode(std::string_view text, std::vector<int32_t>& out) override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return int64_t(token_bytes_.size()); }
  std::string description() const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  void encode_segment(std::string_view text, std::vector<int32_t>& out);
  void encode_pretoken(std::string_view piece, std::vector<int32_t>& out);
  // Where the first added token in `text` at or after `from` starts; text.size() when none.
  size_t next_added_token(std::string_view text, size_t from, size_t& length, int32_t& id) const;

  std::string name_;
  SplitPattern split_;
  bool add_prefix_space_, ignore_merges_;
  std::unordered_map<std::string, int32_t> vocab_;  // byte-level spelling -> id (ignore_merges)
  int32_t byte_symbol_[256];
  std::unordered_map<uint64_t, Merge> merges_;      // (left id << 32 | right id) -> merge
  std::vector<std::string> token_bytes_;            // id -> the bytes it stands for
  std::vector<std::pair<std::string, int32_t>> added_;  // longest first, so the longest match wins
  bool added_first_byte_[256] = {};
  // Pre-tokens repeat (words, spaces): their ids are kept, up to kCacheEntries of them.
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
  std::vector<std::string_view> pieces_;  // scratch: one segment's pre-tokens
};

// GPT-2's bytes_to_unicode: the character (UTF-8) that spells byte b in the vocabulary.
const std::string& byte_level_char(uint8_t b);

}  // namespace dtrain

// The Unicode classes byte-level BPE's pre-tokenizer patterns test (\p{L}, \p{N}, \s), over UTF-8.
// General categories come from ICU (Debian's libicu-dev): the reference tokenizers evaluate these
// patterns with Oniguruma's Unicode tables, and ICU's are the same standard's, kept current by Debian,
// where a table of our own would have to be regenerated with every Unicode version.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dtrain {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

struct CodePoint {
  char32_t value;      // U+FFFD for a byte that does not start a valid UTF-8 sequence
  uint8_t length;      // bytes it occupies: 1 to 4 (1 for an invalid byte)
  CharClass kind;      // an invalid byte is Other: it tokenizes as a byte of punctuation would
};

// The code point starting at text[at]; at < text.size().
CodePoint code_point_at(std::string_view text, size_t at);

}  // namespace dtrain

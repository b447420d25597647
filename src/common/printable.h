// Text from files and users, made safe to put in a message. A config key, a path or a line read
// from a file may hold control characters (an escape sequence recolours or clears the terminal, a
// carriage return overwrites the message) or bytes that are not UTF-8; printed raw they hide the
// very culprit the message is about. Header-only so that every module, and its tests, can use it
// without linking anything.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain {

namespace printable_detail {

inline bool is_continuation(std::string_view s, size_t i, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
  return i < s.size() && static_cast<unsigned char>(s[i]) >= lo && static_cast<unsigned char>(s[i]) <= hi;
}

// The length of the well-formed UTF-8 sequence of two or more bytes at s[i], 0 when there is none
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c >= 0xc2 && c <= 0xdf) return is_continuation(s, i + 1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return is_continuation(s, i + 1, lo, hi) && is_continuation(s, i + 2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return is_continuation(s, i + 1, lo, hi) && is_continuation(s, i + 2) && is_continuation(s, i + 3) ? 4 : 0;
  }
  return 0;
}

inline void append_escaped(std::string& out, std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
}

}  // namespace printable_detail

// `text` with every control character (C0, DEL and C1, newlines and tabs included: a message is
// one line) and every byte that is not part of well-formed UTF-8 written as \xNN. When the result
// would exceed `max_len` bytes it is cut at a character boundary and "... (N more bytes)" says how
// much of `text` was left out, so one huge value cannot bury the rest of the message.
inline std::string printable(std::string_view text, size_t max_len = 200) {
  using namespace printable_detail;
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = 1;
    std::string piece;
    if (c >= 0x20 && c < 0x7f) {
      piece = char(c);
    } else {
      n = std::max<size_t>(1, utf8_sequence_length(text, i));
      // U+0080..U+009F are well-formed but C1 controls, which some terminals act on (U+009B starts
      // an escape sequence).
      const bool c1_control = n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
      if (n > 1 && !c1_control) {
        piece = text.substr(i, n);
      } else {
        append_escaped(piece, text.substr(i, n));
      }
    }
    if (out.size() + piece.size() > max_len) {
      const size_t left = text.size() - i;
      return out + "... (" + std::to_string(left) + (left == 1 ? " more byte)" : " more bytes)");
    }
    out += piece;
    i += n;
  }
  return out;
}

}  // namespace dtrain

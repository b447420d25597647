#include "data/unicode_class.h"

#include <unicode/uchar.h>

namespace dtrain {

namespace {

CharClass classify(char32_t c) {
  if (c < 0x80) {  // ASCII, the bulk of most corpora, without a call into ICU
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::Letter;
    if (c >= '0' && c <= '9') return CharClass::Number;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return CharClass::Space;
    return CharClass::Other;
  }
  if (u_isUWhiteSpace(UChar32(c))) return CharClass::Space;  // \s is the White_Space property
  switch (u_charType(UChar32(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::Letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::Number;
    default:
      return CharClass::Other;
  }
}

}  // namespace

CodePoint code_point_at(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return uint8_t(text[i]); };
  const uint8_t b0 = byte(at);
  if (b0 < 0x80) return {b0, 1, classify(b0)};
  int length = 0;
  char32_t c = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) length = 2, c = b0 & 0x1F, min = 0x80;
  else if ((b0 & 0xF0) == 0xE0) length = 3, c = b0 & 0x0F, min = 0x800;
  else if ((b0 & 0xF8) == 0xF0) length = 4, c = b0 & 0x07, min = 0x10000;
  const CodePoint invalid{0xFFFD, 1, CharClass::Other};
  if (length == 0 || at + size_t(length) > text.size()) return invalid;
  for (int i = 1; i < length; ++i) {
    const uint8_t b = byte(at + size_t(i));
    if ((b & 0xC0) != 0x80) return invalid;
    c = (c << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past Unicode's range are not UTF-8.
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return invalid;
  return {c, uint8_t(length), classify(c)};
}

}  // namespace dtrain

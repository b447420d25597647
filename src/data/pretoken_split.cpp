#include "data/pretoken_split.h"

#include "data/unicode_class.h"

namespace dtrain {

namespace {

// The regex sources as the reference tokenizers' files carry them.
const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text decoded once; position i is the i-th code point, `end` is one past the last.
struct Scan {
  std::vector<CodePoint> cps;
  size_t end() const { return cps.size(); }
  bool is(size_t i, CharClass k) const { return i < cps.size() && cps[i].kind == k; }
  bool is_char(size_t i, char32_t c) const { return i < cps.size() && cps[i].value == c; }
  bool is_newline(size_t i) const { return is_char(i, '\r') || is_char(i, '\n'); }
  // One past the run of class `k` starting at i.
  size_t run(size_t i, CharClass k) const {
    while (is(i, k)) ++i;
    return i;
  }
};

char32_t lower_ascii(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's 't 'm 'd (2) or 're 've 'll (3) at i; 0 when none. `fold`: case-insensitively.
size_t contraction(const Scan& s, size_t i, bool fold) {
  if (!s.is_char(i, '\'') || i + 1 >= s.end()) return 0;
  auto at = [&](size_t j) { return j < s.end() ? (fold ? lower_ascii(s.cps[j].value) : s.cps[j].value) : char32_t(0); };
  const char32_t a = at(i + 1), b = at(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S) then \s+: a whitespace run, less its last character when a non-space follows it (that
// character then leads the next piece), unless the run is that one character.
size_t whitespace_piece(const Scan& s, size_t i) {
  const size_t j = s.run(i, CharClass::Space);
  return j < s.end() && j - i >= 2 ? j - i - 1 : j - i;
}

size_t gpt2_piece(const Scan& s, size_t i) {
  if (size_t n = contraction(s, i, false)) return n;
  const size_t body = s.is_char(i, ' ') && i + 1 < s.end() && !s.is(i + 1, CharClass::Space) ? i + 1 : i;
  const CharClass k = s.cps[body].kind;
  if (k != CharClass::Space) return s.run(body, k) - i;  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
  return whitespace_piece(s, i);
}

size_t llama3_piece(const Scan& s, size_t i) {
  if (size_t n = contraction(s, i, true)) return n;
  const CharClass k = s.cps[i].kind;
  if (k == CharClass::Letter) return s.run(i, k) - i;
  if (k != CharClass::Number && !s.is_newline(i) && s.is(i + 1, CharClass::Letter))  // [^\r\n\p{L}\p{N}]?\p{L}+
    return s.run(i + 1, CharClass::Letter) - i;
  if (k == CharClass::Number) {  // \p{N}{1,3}
    size_t j = i;
    while (j - i < 3 && s.is(j, CharClass::Number)) ++j;
    return j - i;
  }
  const size_t body = s.is_char(i, ' ') && s.is(i + 1, CharClass::Other) ? i + 1 : i;
  if (s.is(body, CharClass::Other)) {  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    size_t j = s.run(body, CharClass::Other);
    while (s.is_newline(j)) ++j;
    return j - i;
  }
  const size_t j = s.run(i, CharClass::Space);  // \s*[\r\n]+: up to the run's last line break
  for (size_t last = j; last > i; --last)
    if (s.is_newline(last - 1)) return last - i;
  return whitespace_piece(s, i);
}

}  // namespace

bool split_pattern_of(const std::string& regex, SplitPattern& out) {
  if (regex == kGpt2Regex) return out = SplitPattern::Gpt2, true;
  if (regex == kLlama3Regex) return out = SplitPattern::Llama3, true;
  return false;
}

void split_pretokens(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& out) {
  Scan s;
  std::vector<size_t> offsets;  // of each code point in `text`
  s.cps.reserve(text.size());
  offsets.reserve(text.size() + 1);
  for (size_t at = 0; at < text.size();) {
    s.cps.push_back(code_point_at(text, at));
    offsets.push_back(at);
    at += s.cps.back().length;
  }
  offsets.push_back(text.size());
  for (size_t i = 0; i < s.end();) {
    const size_t n = pattern == SplitPattern::Gpt2 ? gpt2_piece(s, i) : llama3_piece(s, i);
    out.push_back(text.substr(offsets[i], offsets[i + n] - offsets[i]));
    i += n;
  }
}

}  // namespace dtrain

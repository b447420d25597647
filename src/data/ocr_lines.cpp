#include "data/ocr_lines.h"

#include <cctype>
#include <unordered_set>

namespace dtrain {

namespace {

// `line` with whitespace runs as one space and no space at either end; empty when it holds a byte
// outside printable ASCII.
std::string normalized(std::string_view line) {
  std::string out;
  bool space = false;
  for (const char c : line) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == ' ' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (u < 0x20 || u >= 0x7f) return "";
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

bool mostly_letters(const std::string& line) {
  size_t letters = 0;
  for (const char c : line) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
  return 2 * letters >= line.size();
}

}  // namespace

std::vector<std::string> ocr_lines(std::string_view text, OcrLineBounds bounds) {
  std::vector<std::string> lines;
  std::unordered_set<std::string> seen;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line = normalized(text.substr(start, end - start));
    start = end + 1;
    const int n = int(line.size());
    if (n < bounds.min_chars || n > bounds.max_chars || !mostly_letters(line)) continue;
    if (seen.insert(line).second) lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace dtrain

#include "data/ocr_random_lines.h"

#include <stdexcept>

#include "common/hash64.h"

namespace dtrain {

std::vector<std::string> random_ocr_lines(const std::vector<std::string>& model_lines, int64_t count, uint64_t seed) {
  std::vector<std::string> lines;
  if (count <= 0) return lines;
  if (model_lines.empty()) throw std::invalid_argument("random OCR lines need corpus lines to take their lengths and characters from");
  std::string pool, letters;  // every character of the corpus lines, and those that are not spaces
  for (const auto& line : model_lines) pool += line;
  for (const char c : pool)
    if (c != ' ') letters += c;
  uint64_t state = seed;
  auto draw = [&state](size_t n) { return size_t((state = splitmix64(state)) % n); };
  lines.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    const size_t length = model_lines[draw(model_lines.size())].size();
    std::string line;
    for (size_t k = 0; k < length; ++k) {
      const bool space_allowed = k > 0 && k + 1 < length && line.back() != ' ';
      line += space_allowed ? pool[draw(pool.size())] : letters[draw(letters.size())];
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace dtrain

// How an allowed range reads in an error message, the same for config keys and command-line flags:
// "at least 0", "more than 0", "between 1 and 4096", "more than 0 and at most 31536000".
// std::to_string would print 0 as "0.000000" and the largest double in 309 digits.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace dtrain {

namespace range_words_detail {

inline std::string range_text(const std::string& lo, const std::string& hi, bool min_exclusive) {
  if (min_exclusive) return "more than " + lo + (hi.empty() ? "" : " and at most " + hi);
  return hi.empty() ? "at least " + lo : "between " + lo + " and " + hi;
}

}  // namespace range_words_detail

// A number as a message shows it: whole numbers in full, others in six significant digits.
inline std::string number_words(double x) {
  if (x == std::floor(x) && std::abs(x) <= 0x1p53) return std::to_string(int64_t(x));
  std::ostringstream s;
  s << x;
  return s.str();
}

// [min, max], or (min, max] when `min_exclusive`; an infinite max is no upper bound.
inline std::string range_words(double min, double max = INFINITY, bool min_exclusive = false) {
  return range_words_detail::range_text(number_words(min), std::isinf(max) ? "" : number_words(max), min_exclusive);
}

// [min, max] of whole numbers; the largest int64 as max is no upper bound worth naming.
inline std::string range_words(int64_t min, int64_t max) {
  return range_words_detail::range_text(std::to_string(min),
                                        max == std::numeric_limits<int64_t>::max() ? "" : std::to_string(max), false);
}

}  // namespace dtrain

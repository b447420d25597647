// Bounds for numeric command-line flags, checked on the text as typed and explained in words:
// "--max-restarts: must be at least 0, got -1". CLI11's NonNegativeNumber and PositiveNumber print
// their bound as the largest double, 309 digits long, and let "nan" and "inf" through, which turn
// into undefined behaviour where seconds are converted to milliseconds.
#pragma once
#include <CLI/CLI.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "common/printable.h"
#include "common/range_words.h"

namespace dtrain {

namespace flag_bounds_detail {

// The range in --help, in CLI11's own notation: "INT:>= 0", "FLOAT:in (0 - 31536000]".
inline std::string help_text(const std::string& min, const std::string& max, bool min_exclusive) {
  if (max.empty()) return (min_exclusive ? "> " : ">= ") + min;
  return std::string("in ") + (min_exclusive ? "(" : "[") + min + " - " + max + "]";
}

}  // namespace flag_bounds_detail

// A whole number in [min, max], in decimal digits with an optional sign. An int flag gets INT_MAX as
// its max, so CLI11's own conversion never meets a value it would refuse with a bare "Could not
// convert"; such a bound of the type goes unsaid until it is crossed.
inline CLI::Validator whole_number(int64_t min, int64_t max = std::numeric_limits<int64_t>::max()) {
  const bool type_bound = max == std::numeric_limits<int>::max() || max == std::numeric_limits<int64_t>::max();
  const std::string words = range_words(min, type_bound ? std::numeric_limits<int64_t>::max() : max);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long x = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0')
          return "must be a whole number, " + words + ", got '" + printable(text) + "'";
        const bool above = (errno == ERANGE && x > 0) || x > max, below = (errno == ERANGE && x < 0) || x < min;
        if (above && type_bound) return "must be at most " + std::to_string(max) + ", got " + printable(text);
        if (above || below) return "must be " + words + ", got " + printable(text);
        return "";
      },
      flag_bounds_detail::help_text(std::to_string(min), type_bound ? "" : std::to_string(max), false));
}

// A finite number in [min, max], or in (min, max] when `min_exclusive`.
inline CLI::Validator real_number(double min, double max = INFINITY, bool min_exclusive = false) {
  const std::string words = range_words(min, max, min_exclusive);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0')
          return "must be a number, " + words + ", got '" + printable(text) + "'";
        if (!std::isfinite(x) || x < min || (min_exclusive && x == min) || x > max)
          return "must be " + words + ", got " + printable(text);
        return "";
      },
      flag_bounds_detail::help_text(number_words(min), std::isinf(max) ? "" : number_words(max), min_exclusive));
}

}  // namespace dtrain

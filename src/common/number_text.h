// Numbers as the logs print them.
#pragma once
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>

namespace dtrain {

// `v` with `digits` decimals: fixed(0.12345, 3) is "0.123".
inline std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// Three significant digits in scientific notation: "3.00e-04".
inline std::string scientific(double v) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(2) << v;
  return s.str();
}

// A value as a user would write it: 65536, 0.5.
inline std::string plain(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Bytes as MiB with one decimal: "472.0".
inline std::string mib(int64_t bytes) { return fixed(double(bytes) / (1 << 20), 1); }

// A token rate: "1.25M" or "812.4k".
inline std::string rate(double per_s) { return per_s >= 1e6 ? fixed(per_s / 1e6, 2) + "M" : fixed(per_s / 1e3, 1) + "k"; }

}  // namespace dtrain

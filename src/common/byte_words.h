// A byte count as people read it: "3.5 MiB", "512 bytes".
#pragma once
#include <sstream>
#include <string>

namespace dtrain {

inline std::string byte_words(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  double x = bytes;
  int unit = 0;
  while (x >= 1024 && unit < 8) {
    x /= 1024;
    ++unit;
  }
  std::ostringstream s;
  s.precision(x < 10 && unit > 0 ? 2 : 3);
  s << x << " " << units[unit];
  return s.str();
}

}  // namespace dtrain

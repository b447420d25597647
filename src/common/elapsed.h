// Wall-clock durations for logs and reports, on the monotonic clock.
#pragma once
#include <chrono>

namespace dtrain {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace dtrain

// The longest wait a user may ask for: a collective's, a rendezvous' or a heartbeat's timeout, a
// grace period. Seconds become std::chrono durations added to steady_clock::now(), whose
// nanosecond count overflows some 292 years out; a year is far beyond any real wait and keeps every
// conversion defined.
#pragma once

namespace dtrain {

constexpr double kMaxWaitSeconds = 365.0 * 24 * 3600;

}  // namespace dtrain

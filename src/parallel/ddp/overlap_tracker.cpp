#include "parallel/ddp/overlap_tracker.h"

#include <algorithm>
#include <utility>

namespace dtrain {

double OverlapTracker::now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void OverlapTracker::begin(int buckets) {
  std::lock_guard<std::mutex> lock(mutex_);
  start_ = Clock::now();
  launch_.assign(buckets, -1);
  complete_.assign(buckets, -1);
  current_ = StepOverlap{};
  current_.buckets = buckets;
}

void OverlapTracker::grad_ready() { current_.last_grad_s = now(); }

void OverlapTracker::launched(int bucket) {
  std::lock_guard<std::mutex> lock(mutex_);
  launch_[bucket] = now();
  if (current_.first_launch_s < 0) current_.first_launch_s = launch_[bucket];
}

void OverlapTracker::completed(int bucket) {
  std::lock_guard<std::mutex> lock(mutex_);
  complete_[bucket] = now();
}

void OverlapTracker::backward_ended() { current_.backward_end_s = now(); }

void OverlapTracker::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  const double end = now();
  current_.wait_s = end - current_.backward_end_s;
  std::vector<std::pair<double, double>> intervals;
  for (size_t b = 0; b < launch_.size(); ++b)
    if (launch_[b] >= 0) intervals.emplace_back(launch_[b], complete_[b] >= 0 ? complete_[b] : end);
  std::sort(intervals.begin(), intervals.end());
  double covered_until = 0;
  for (const auto& [from, to] : intervals) {
    const double a = std::max(from, covered_until);
    if (to <= a) continue;
    current_.comm_s += to - a;
    current_.hidden_s += std::max(0.0, std::min(to, current_.backward_end_s) - a);
    covered_until = to;
  }
  last_ = current_;
}

}  // namespace dtrain

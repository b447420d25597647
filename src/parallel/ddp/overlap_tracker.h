// How much of a step's gradient communication ran while backward was still computing. Each bucket's
// all-reduce is an interval from launch to completion; their union is the communication time, and
// the part of it before backward ended was hidden. Times are seconds since begin().
#pragma once
#include <chrono>
#include <mutex>
#include <vector>

namespace dtrain {

struct StepOverlap {
  double comm_s = 0;          // union of the all-reduce intervals
  double hidden_s = 0;        // ... of which before backward ended
  double first_launch_s = -1; // when the first bucket's all-reduce started
  double last_grad_s = -1;    // when backward produced its last gradient
  double backward_end_s = 0;  // when finish_gradient_sync() was called
  double wait_s = 0;          // time blocked in finish_gradient_sync()
  int buckets = 0;
};

class OverlapTracker {
 public:
  void begin(int buckets);
  void grad_ready();
  void launched(int bucket);
  void completed(int bucket);  // may be called from another thread
  void backward_ended();
  void finished();
  const StepOverlap& last() const { return last_; }

 private:
  double now() const;

  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  std::mutex mutex_;
  std::vector<double> launch_, complete_;
  StepOverlap current_, last_;
};

}  // namespace dtrain

// The background thread of checkpoint.async: one save at a time is written while training goes on.
// The caller copies the state first (ckpt/host_copies.h) and hands over a write that reads only the
// copies; it waits for the save in flight before it copies the next (the buffers are reused), and
// collects each save's end at a step boundary, on its own thread: the log, the metrics and any error
// stay on the training thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace dtrain {

class AsyncCheckpointWriter {
 public:
  // How a background save ended: the committed directory and how long the write took.
  struct Written {
    int64_t step = 0;
    std::string dir;
    double write_s = 0;
  };

  AsyncCheckpointWriter() = default;
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;
  // Waits for the save in flight, whose error nobody collects any more (an error already ends the run).
  ~AsyncCheckpointWriter();

  // Starts `write` (which returns the committed directory) for `step`. A save must not be in flight.
  void start(int64_t step, std::function<std::string()> write);
  // Started and not collected yet; still being written.
  bool in_flight() const { return thread_.joinable(); }
  bool writing() const { return in_flight() && !ended_; }
  // Ended with an error that is not collected yet (error_ is set before ended_).
  bool failed() const { return in_flight() && ended_ && error_; }
  // The end of the save in flight: nullopt when there is none, or while it runs and `wait` is false;
  // its error rethrown when it failed.
  std::optional<Written> collect(bool wait);

 private:
  std::thread thread_;
  std::atomic<bool> ended_{false};
  Written written_;
  std::exception_ptr error_;
};

}  // namespace dtrain

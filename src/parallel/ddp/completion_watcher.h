// Waits for in-flight collectives on a thread of its own, in launch order, and notes when each
// finished — the only way to know how much communication overlapped backward. The owner drains it
// before touching the results; the first failure is rethrown there, on the owner's thread.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/collectives.h"

namespace dtrain {

class CompletionWatcher {
 public:
  CompletionWatcher();
  ~CompletionWatcher();
  // `on_done` runs on the watcher thread once `handle` has completed.
  void watch(CommHandle handle, std::function<void()> on_done);
  // Blocks until everything watched so far is complete; rethrows the first failure.
  void drain() { wait_until_at_most(0); }
  // Blocks until at most `in_flight` of the watched collectives are incomplete (each completes or
  // fails within its group's timeout); rethrows the first failure.
  void wait_until_at_most(int in_flight);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<CommHandle, std::function<void()>>> queue_;
  int in_flight_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace dtrain

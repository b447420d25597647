// Runs tasks one at a time, in submission order, on a thread of its own, completing a c10d Work for
// each. A synchronous caller may instead run its task on its own thread once everything submitted
// before it is done, which saves the hand-over to the worker and back (tens of microseconds, most
// of a small collective's time).
#pragma once
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace dtrain {

class TaskQueue {
 public:
  using Task = std::function<void()>;
  // `fail_fast`: after a task fails, every later task fails at once with that error (a collective
  // that failed leaves its group's shared state unusable).
  explicit TaskQueue(bool fail_fast);
  ~TaskQueue();  // finishes what was submitted, then stops

  c10::intrusive_ptr<c10d::Work> submit(Task task);
  c10::intrusive_ptr<c10d::Work> run_here(Task task);
  // submit() for an async caller, run_here() for one that waits at once (c10d's asyncOp).
  c10::intrusive_ptr<c10d::Work> run(bool async, Task task) {
    return async ? submit(std::move(task)) : run_here(std::move(task));
  }

 private:
  class Work;
  void loop();
  // Runs `task` and drops it before completing `work`: what it captured (a collective's send buffer)
  // is freed before a waiter can go on, not whenever this thread next runs.
  void execute(Work& work, Task task);
  void finished_one();

  const bool fail_fast_;
  std::mutex mutex_;
  // Two conditions, so that the end of every synchronous task does not wake the idle worker (a
  // futex wake and a context switch, more than a small collective's own time).
  std::condition_variable work_or_stop_;  // the worker waits: a task queued and none running, or stopping
  std::condition_variable idle_;          // run_here waits: nothing queued and nothing running
  std::deque<std::pair<c10::intrusive_ptr<Work>, Task>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::string failure_;  // the first failure, when fail_fast_
  std::thread worker_;
};

}  // namespace dtrain

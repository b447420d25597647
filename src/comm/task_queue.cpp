#include "comm/task_queue.h"

#include <stdexcept>

namespace dtrain {

class TaskQueue::Work : public c10d::Work {
 public:
  void complete(std::exception_ptr error) { finish(std::move(error)); }
};

TaskQueue::TaskQueue(bool fail_fast) : fail_fast_(fail_fast), worker_([this] { loop(); }) {}

TaskQueue::~TaskQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_or_stop_.notify_all();
  worker_.join();
}

c10::intrusive_ptr<c10d::Work> TaskQueue::submit(Task task) {
  auto work = c10::make_intrusive<Work>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(work, std::move(task));
  }
  work_or_stop_.notify_all();
  return work;
}

c10::intrusive_ptr<c10d::Work> TaskQueue::run_here(Task task) {
  auto work = c10::make_intrusive<Work>();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
    busy_ = true;
  }
  execute(*work, std::move(task));
  finished_one();
  return work;
}

void TaskQueue::loop() {
  for (;;) {
    std::pair<c10::intrusive_ptr<Work>, Task> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_or_stop_.wait(lock, [&] { return (!queue_.empty() && !busy_) || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    execute(*next.first, std::move(next.second));
    finished_one();
  }
}

// Wakes the worker only when tasks were submitted meanwhile, and synchronous callers only once the
// queue is drained.
void TaskQueue::finished_one() {
  bool more;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    more = !queue_.empty();
  }
  if (more) work_or_stop_.notify_all();
  else idle_.notify_all();
}

// Called with busy_ set, so failure_ has one writer at a time.
void TaskQueue::execute(Work& work, Task task) {
  if (!failure_.empty()) {
    task = nullptr;
    work.complete(std::make_exception_ptr(std::runtime_error("an earlier operation on this group failed: " + failure_)));
    return;
  }
  std::exception_ptr error;
  try {
    task();
  } catch (const std::exception& e) {
    error = std::current_exception();
    if (fail_fast_) failure_ = e.what();
  } catch (...) {
    error = std::current_exception();
    if (fail_fast_) failure_ = "unknown error";
  }
  task = nullptr;
  work.complete(error);
}

}  // namespace dtrain

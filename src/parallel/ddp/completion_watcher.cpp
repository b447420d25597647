#include "parallel/ddp/completion_watcher.h"

namespace dtrain {

CompletionWatcher::CompletionWatcher() : thread_([this] { run(); }) {}

CompletionWatcher::~CompletionWatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CompletionWatcher::watch(CommHandle handle, std::function<void()> on_done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(std::move(handle), std::move(on_done));
    ++in_flight_;
  }
  cv_.notify_all();
}

void CompletionWatcher::wait_until_at_most(int in_flight) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this, in_flight] { return in_flight_ <= in_flight; });
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CompletionWatcher::run() {
  for (;;) {
    std::pair<CommHandle, std::function<void()>> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr failure;
    try {
      item.first.wait();
      item.second();
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !error_) error_ = failure;
      --in_flight_;
    }
    cv_.notify_all();
  }
}

}  // namespace dtrain

#include "ckpt/async_checkpoint_writer.h"

#include <chrono>
#include <stdexcept>

namespace dtrain {

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void AsyncCheckpointWriter::start(int64_t step, std::function<std::string()> write) {
  if (in_flight()) throw std::logic_error("a checkpoint save started while the save of step " + std::to_string(written_.step) + " is in flight");
  ended_ = false;
  written_ = {step, "", 0};
  error_ = nullptr;
  thread_ = std::thread([this, write = std::move(write)] {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      written_.dir = write();
    } catch (...) {
      error_ = std::current_exception();
    }
    written_.write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ended_ = true;
  });
}

std::optional<AsyncCheckpointWriter::Written> AsyncCheckpointWriter::collect(bool wait) {
  if (!in_flight() || (!wait && !ended_)) return std::nullopt;
  thread_.join();
  if (error_) std::rethrow_exception(error_);
  return written_;
}

}  // namespace dtrain

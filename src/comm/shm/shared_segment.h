// A named POSIX shared-memory segment mapped into this process. The name only serves to let the
// members of a group find the segment: once every member has mapped it, the creator removes the
// name, so the memory lives exactly as long as some member does and nothing is left behind in
// /dev/shm even when a rank is killed (the launcher removes the names of a start-up interrupted
// before that point; see shared_memory_prefix in launch/worker_env.h).
#pragma once
#include <cstddef>
#include <string>

namespace dtrain::shm {

class SharedSegment {
 public:
  // A new zero-filled segment of `bytes` bytes, its pages allocated; a leftover of the same name is
  // replaced. A /dev/shm without room for it is an error naming /dev/shm, the bytes and dist.backend=gloo.
  static SharedSegment create(const std::string& name, size_t bytes);
  // The segment another process created; its size must be `bytes`.
  static SharedSegment open(const std::string& name, size_t bytes);
  // Removes the name (no error when it is already gone).
  static void remove(const std::string& name);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  SharedSegment(char* data, size_t size) : data_(data), size_(size) {}
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dtrain::shm

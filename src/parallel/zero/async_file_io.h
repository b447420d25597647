// Positioned reads and writes that run while the caller computes: io_uring (liburing), one ring per
// object, requests completed in any order and waited for by ticket. Where the kernel refuses
// io_uring (a container's seccomp profile, kernel.io_uring_disabled) each request runs at once with
// pread/pwrite instead: the same results without the overlap, and mode() says so.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <sys/types.h>

struct io_uring;

namespace dtrain {

class AsyncFileIo {
 public:
  explicit AsyncFileIo(unsigned queue_depth = 64);
  ~AsyncFileIo();
  AsyncFileIo(const AsyncFileIo&) = delete;
  AsyncFileIo& operator=(const AsyncFileIo&) = delete;

  // "io_uring", or "synchronous pread/pwrite (io_uring unavailable: ...)".
  const std::string& mode() const { return mode_; }

  // Starts reading (writing) `bytes` at `offset` of `fd` into (from) `buffer`, which must stay
  // alive and untouched until wait() on the returned ticket. `name` names the file in errors.
  uint64_t read(int fd, const std::string& name, void* buffer, size_t bytes, off_t offset);
  uint64_t write(int fd, const std::string& name, const void* buffer, size_t bytes, off_t offset);
  // Until the request is done; throws naming the file, the offset and the error of a failed one.
  void wait(uint64_t ticket);
  // Until every request is done (errors as wait()).
  void wait_all();

 private:
  struct Request {
    bool write;
    int fd;
    std::string name;
    char* buffer;
    size_t bytes, done = 0;
    off_t offset;
    int error = 0;
    bool finished = false;
  };
  uint64_t submit(Request request);
  void enqueue(uint64_t ticket);
  void reap_one();
  void finish_synchronously(Request& r);
  void check(uint64_t ticket);

  io_uring* ring_ = nullptr;
  unsigned queue_depth_;
  unsigned in_flight_ = 0;
  std::string mode_;
  uint64_t next_ticket_ = 1;
  std::map<uint64_t, Request> requests_;  // until waited for
};

}  // namespace dtrain

// Positioned reads and writes of a whole range: a short transfer goes on from where it stopped, and
// a call interrupted by a signal is made again.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>

namespace dtrain {

// The most one read or write asks for: the kernel caps a single call near 2 GiB.
constexpr size_t kMaxTransfer = size_t(1) << 30;

// Reads (`write` false) or writes `bytes` at `offset` of `fd` into or from `buffer`, kMaxTransfer
// at most per call. Returns the bytes moved: all of them, or fewer when a call failed (errno says
// why) or a read met the end of the file (errno 0).
inline size_t transfer_all(bool write, int fd, char* buffer, size_t bytes, off_t offset) {
  size_t done = 0;
  while (done < bytes) {
    const size_t len = std::min(bytes - done, kMaxTransfer);
    const off_t at = offset + off_t(done);
    const ssize_t got = write ? ::pwrite(fd, buffer + done, len, at) : ::pread(fd, buffer + done, len, at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      break;
    }
    done += size_t(got);
  }
  return done;
}

}  // namespace dtrain

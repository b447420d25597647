// Scratch files such as NVMe offload keeps its state in: unnamed (O_TMPFILE, or created and unlinked
// at once where the file system lacks it), so the kernel frees them however the process ends, a kill
// included, and nothing is ever left in their directory; their blocks reserved at once, so a full
// disk shows at start rather than in the middle of a step.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dtrain {

namespace detail {

// A read-write descriptor of an empty unnamed file in `dir`; throws as make_unnamed_file does.
inline int open_unnamed_file(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) throw std::invalid_argument("'" + dir + "' does not exist");
  if (!S_ISDIR(st.st_mode)) throw std::invalid_argument("'" + dir + "' is not a directory");
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {  // no O_TMPFILE here: name it, then unlink it
    std::string name = dir + "/dtrain-offload-XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) throw std::invalid_argument("'" + dir + "' is not writable: " + std::strerror(errno));
  return fd;
}

}  // namespace detail

// Throws as make_unnamed_file does when `dir` cannot hold such files at all (missing, not a
// directory, not writable), before anything knows how large they will be.
inline void check_unnamed_file_dir(const std::string& dir) { ::close(detail::open_unnamed_file(dir)); }

// A read-write descriptor of `bytes` zeroed bytes in directory `dir`. Throws std::invalid_argument
// saying what is wrong with `dir` (missing, not a directory, not writable, no room).
inline int make_unnamed_file(const std::string& dir, int64_t bytes) {
  const int fd = detail::open_unnamed_file(dir);
  if (const int e = ::posix_fallocate(fd, 0, bytes); e != 0) {
    ::close(fd);
    throw std::invalid_argument("'" + dir + "' has no room for " + std::to_string(bytes >> 20) + " MiB: " + std::strerror(e));
  }
  return fd;
}

}  // namespace dtrain

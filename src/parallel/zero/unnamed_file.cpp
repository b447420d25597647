#include "parallel/zero/unnamed_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dtrain {

namespace {

// A read-write descriptor of an empty unnamed file in `dir`; throws as make_unnamed_file does.
int open_unnamed_file(const std::string& dir) {
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

}  // namespace

void check_unnamed_file_dir(const std::string& dir) { ::close(open_unnamed_file(dir)); }

int make_unnamed_file(const std::string& dir, int64_t bytes) {
  const int fd = open_unnamed_file(dir);
  if (const int e = ::posix_fallocate(fd, 0, bytes); e != 0) {
    ::close(fd);
    throw std::invalid_argument("'" + dir + "' has no room for " + std::to_string(bytes >> 20) + " MiB: " + std::strerror(e));
  }
  return fd;
}

}  // namespace dtrain

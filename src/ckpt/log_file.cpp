#include "ckpt/log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dtrain {

LogFile::~LogFile() { close(); }

void LogFile::open(const std::string& path) {
  close();
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open '" + path + "' for writing: " + std::strerror(errno));
  path_ = path;
}

void LogFile::append(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      // O_APPEND leaves the offset at the end of what was written: step back over this append's part.
      const off_t end = ::lseek(fd_, 0, SEEK_CUR);
      if (done > 0 && end >= off_t(done)) (void)::ftruncate(fd_, end - off_t(done));
      throw std::runtime_error("cannot write '" + path_ + "': " + std::strerror(error));
    }
    done += size_t(n);
  }
}

void LogFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace dtrain

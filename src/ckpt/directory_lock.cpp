#include "ckpt/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/printable.h"

namespace dtrain {

namespace {

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  ssize_t n;
  ::lseek(fd, 0, SEEK_SET);
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string holder_description() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char since[32];
  std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return "pid " + std::to_string(::getpid()) + " on host " + host + " (since " + since + ")";
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& what, std::string* previous_holder) {
  const std::string path = dir + "/" + kFileName;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create the lock file '" + path + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = read_all(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw std::runtime_error("cannot lock '" + path + "': " + std::strerror(err));
    // The holder writes its name just after locking; an empty file means it is between the two.
    throw DirectoryInUse(what + " '" + printable(dir) + "' is in use by " + (holder.empty() ? "another process" : printable(holder)) +
                         ": two runs must not share it; wait for that run to end, or give this one its own directory");
  }
  if (previous_holder) *previous_holder = printable(read_all(fd_));
  const std::string me = holder_description() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw std::runtime_error("cannot write the lock file '" + path + "': " + std::strerror(errno));
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  // A clean exit leaves an empty file; only a holder that died leaves its name behind. Failing to
  // clear it costs the next run no more than a "took over" line.
  [[maybe_unused]] const int cleared = ::ftruncate(fd_, 0);
  ::close(fd_);  // closing releases the flock
}

}  // namespace dtrain

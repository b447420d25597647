#include "ckpt/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/host_name.h"
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
  const std::time_t now = std::time(nullptr);
  char since[32];
  std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return "pid " + std::to_string(::getpid()) + " on host " + host_name() + " (since " + since + ")";
}

// Whether /proc/locks has a granted flock on the file `st` describes. Its lines read
// "1: FLOCK  ADVISORY  WRITE 4711 fe:00:10952980 0 EOF"; a waiter's line has "->" after the number.
bool flocked(const struct stat& st) {
  std::ifstream table("/proc/locks");
  for (std::string line; std::getline(table, line);) {
    std::istringstream fields(line);
    std::string number, kind, mode, access, pid, file;
    fields >> number >> kind >> mode >> access >> pid >> file;
    unsigned dev_major = 0, dev_minor = 0;
    unsigned long inode = 0;
    if (kind != "FLOCK" || std::sscanf(file.c_str(), "%x:%x:%lu", &dev_major, &dev_minor, &inode) != 3) continue;
    if (dev_major == major(st.st_dev) && dev_minor == minor(st.st_dev) && inode == st.st_ino) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> DirectoryLock::holder(const std::string& dir) {
  const std::string path = dir + "/" + kFileName;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !flocked(st)) return std::nullopt;
  std::ifstream file(path);
  std::string text;
  std::getline(file, text);
  // The holder writes its name just after locking; an empty file means it is between the two.
  return text.empty() ? "another process" : printable(text);
}

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

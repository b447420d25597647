#include "comm/shm/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace dtrain::shm {
namespace {

std::runtime_error os_error(const std::string& what, const std::string& name) {
  return std::runtime_error(what + " shared-memory segment /dev/shm" + name + ": " + std::strerror(errno));
}

// Populated at once: the first collectives would otherwise pay for faulting the buffers in.
char* map(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int saved = errno;
  close(fd);
  errno = saved;
  if (p == MAP_FAILED) throw os_error("cannot map", name);
  return static_cast<char*>(p);
}

// What a /dev/shm too small for the segment gets instead of a SIGBUS: where, how much, and the way out.
std::runtime_error no_room(const std::string& name, size_t bytes) {
  struct statvfs fs{};
  const std::string free_bytes = ::statvfs("/dev/shm", &fs) == 0 ? std::to_string(uint64_t(fs.f_bavail) * fs.f_frsize) : "?";
  return std::runtime_error("/dev/shm is too small for the shared-memory backend: segment /dev/shm" + name + " needs " +
                            std::to_string(bytes) + " bytes and " + free_bytes +
                            " are free; enlarge /dev/shm (a container's --shm-size) or use dist.backend=gloo");
}

}  // namespace

SharedSegment SharedSegment::create(const std::string& name, size_t bytes) {
  remove(name);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw os_error("cannot create", name);
  // Sized by allocating every page now rather than by ftruncate: tmpfs hands out pages when they are
  // first touched, so a /dev/shm that cannot hold the segment would kill a rank with SIGBUS at its
  // first collective; here it is ENOSPC, before anything is mapped.
  if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    close(fd);
    shm_unlink(name.c_str());
    if (rc == ENOSPC) throw no_room(name, bytes);
    errno = rc;
    throw os_error("cannot size (" + std::to_string(bytes) + " bytes)", name);
  }
  try {
    return SharedSegment(map(fd, bytes, name), bytes);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
}

SharedSegment SharedSegment::open(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw os_error("cannot open", name);
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    throw std::runtime_error("shared-memory segment /dev/shm" + name + " has " + std::to_string(st.st_size) +
                             " bytes where this rank expects " + std::to_string(bytes) +
                             " (ranks of one group built with different settings?)");
  }
  return SharedSegment(map(fd, bytes, name), bytes);
}

void SharedSegment::remove(const std::string& name) { shm_unlink(name.c_str()); }

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedSegment::~SharedSegment() {
  if (data_) munmap(data_, size_);
}

}  // namespace dtrain::shm

// An exclusive claim on a directory for the life of a run: flock(2) on `<dir>/.dtrain.lock`, whose
// text says who holds it. Two runs can then never write one run or checkpoint directory, and a
// second run is refused at once with the holder named. The kernel drops the lock when its holder
// dies, however it dies, so a lock file left by a dead process is simply taken over.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>

namespace dtrain {

struct DirectoryInUse : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class DirectoryLock {
 public:
  // Locks the existing directory `dir`; `what` names it in messages ("run directory"). Throws
  // DirectoryInUse naming the holder's pid and host. `previous_holder` receives the text a dead
  // holder left (empty when there was none).
  DirectoryLock(const std::string& dir, const std::string& what, std::string* previous_holder);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  static constexpr const char* kFileName = ".dtrain.lock";

  // Who holds `dir`'s lock now, as the holder wrote it ("pid 12 on host a (since ...)"); nullopt when
  // no live process does. It reads the kernel's table of locks (/proc/locks) and never takes the lock,
  // not even for a moment, so asking cannot make the holder's own claim fail. A lock taken on another
  // host of a shared file system is not in that table.
  static std::optional<std::string> holder(const std::string& dir);

 private:
  int fd_ = -1;
};

}  // namespace dtrain

// An exclusive claim on a directory for the life of a run: flock(2) on `<dir>/.dtrain.lock`, whose
// text says who holds it. Two runs can then never write one run or checkpoint directory, and a
// second run is refused at once with the holder named. The kernel drops the lock when its holder
// dies, however it dies, so a lock file left by a dead process is simply taken over.
#pragma once
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

 private:
  int fd_ = -1;
};

}  // namespace dtrain

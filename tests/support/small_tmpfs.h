// Small file systems for what a full disk does: a tmpfs of a few KiB mounted on a scratch directory
// (a full run directory), or one mounted over /dev/shm for a process tree only, in a mount namespace
// of its own (a /dev/shm too small for the shared-memory backend), so the machine's own /dev/shm and
// the tests running beside this one are untouched. Both need root (CAP_SYS_ADMIN); without it, or
// where mounting is refused (a container without the capability), they say why, for GTEST_SKIP.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dtrain::test {

class SmallTmpfs {
 public:
  // A fresh scratch directory `name` with a tmpfs of `bytes` mounted on it, unmounted when this ends.
  SmallTmpfs(const std::string& name, size_t bytes);
  ~SmallTmpfs();
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  const std::string& dir() const { return dir_; }
  // Fills it to the last block with a file named "filler": a disk that is already full.
  void fill() const;
  // Empty when mounted; otherwise why not.
  const std::string& unavailable() const { return unavailable_; }

 private:
  std::string dir_, unavailable_;
};

// `argv` run in a private mount namespace with a tmpfs of `bytes` over its /dev/shm.
std::vector<std::string> with_small_dev_shm(size_t bytes, const std::vector<std::string>& argv);
// Empty when with_small_dev_shm can work here; otherwise why not.
std::string small_dev_shm_unavailable();

}  // namespace dtrain::test

#include "support/small_tmpfs.h"

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

std::string root_needed() { return ::geteuid() == 0 ? "" : "mounting a tmpfs needs root (running as uid " + std::to_string(::geteuid()) + ")"; }

}  // namespace

SmallTmpfs::SmallTmpfs(const std::string& name, size_t bytes) : dir_(scratch_dir(name)), unavailable_(root_needed()) {
  if (!unavailable_.empty()) return;
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
  if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
    unavailable_ = "cannot mount a tmpfs on " + dir_ + ": " + std::strerror(errno);
}

void SmallTmpfs::fill() const {
  std::ofstream filler(dir_ + "/filler");
  const std::string block(4096, 'x');
  while (filler << block << std::flush) {
  }
}

SmallTmpfs::~SmallTmpfs() {
  if (unavailable_.empty()) ::umount2(dir_.c_str(), MNT_DETACH);
}

std::vector<std::string> with_small_dev_shm(size_t bytes, const std::vector<std::string>& argv) {
  // unshare makes the new namespace's mounts private, so the mount below is seen by this tree only.
  std::vector<std::string> wrapped = {"unshare", "--mount", "--propagation", "private", "sh", "-c",
                                      "mount -t tmpfs -o size=" + std::to_string(bytes) + " tmpfs /dev/shm && exec \"$@\"", "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

std::string small_dev_shm_unavailable() {
  if (const std::string reason = root_needed(); !reason.empty()) return reason;
  const ProcessResult probe = run_process(with_small_dev_shm(1 << 20, {"true"}), 30);
  return probe.exit_code == 0 ? "" : "cannot mount a tmpfs over /dev/shm in a mount namespace of its own: " + probe.output;
}

}  // namespace dtrain::test

#include "train/run_directories.h"

#include <filesystem>

#include "common/printable.h"

namespace dtrain {

ClaimedRun claim_run_directories(TrainConfig& c, int restart_count) {
  namespace fs = std::filesystem;
  if (c.run_dir.empty()) c.run_dir = default_run_dir();
  const std::string ckpt = c.checkpoint_dir();
  for (const auto& [dir, key] : {std::pair{c.run_dir, "train.run_dir"}, std::pair{ckpt, "checkpoint.dir"}}) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw ConfigError(std::string(key) + ": '" + printable(dir) + "' exists and is not a directory");
  }
  ClaimedRun out;
  auto claim = [&out](const std::string& dir, const std::string& what) {
    fs::create_directories(dir);
    std::string previous;
    auto lock = std::make_unique<DirectoryLock>(dir, what, &previous);
    if (!previous.empty()) out.notes.push_back("took over the lock of " + printable(dir) + " from " + previous + ", which is no longer running");
    return lock;
  };
  out.run_lock = claim(c.run_dir, "run directory");
  std::error_code ec;  // a checkpoint directory that does not exist yet is not the run directory
  if (!fs::equivalent(ckpt, c.run_dir, ec)) out.checkpoint_lock = claim(ckpt, "checkpoint directory");
  out.start = plan_start(c, restart_count);
  out.notes.insert(out.notes.end(), out.start.notes.begin(), out.start.notes.end());
  return out;
}

}  // namespace dtrain

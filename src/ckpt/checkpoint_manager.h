// Checkpoint directories under checkpoint.dir, one per saved step ("step-00000100"), committed
// atomically: files go into "step-00000100.tmp", are fsynced and listed with their sizes in
// manifest.json, and the directory is renamed into place; the `latest` pointer is updated last.
// A crash at any moment leaves the previous checkpoint intact and `latest` pointing at it.
// Every rank writes its own files into the same directory (replicated state is written by rank 0
// alone today; sharded state adds per-rank files), so the layout extends to sharded checkpoints.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

struct CheckpointOptions {
  std::string dir;           // checkpoint.dir
  int64_t every_steps = 0;   // 0: only time- or end-triggered saves
  double every_hours = 0;    // 0: no time-triggered saves
  int keep = 0;              // newest checkpoints kept; 0 keeps all
  bool save_at_end = true;   // save after the last step
};

class CheckpointManager {
 public:
  // `barrier` synchronises all ranks (a no-op for one); rank 0 commits.
  CheckpointManager(CheckpointOptions options, int rank, std::function<void()> barrier);

  // Whether to save after `step` (1-based count of finished steps). Every rank must get the same
  // answer, so time-triggered saves use rank 0's clock, which `elapsed_agreed_hours` carries.
  bool due(int64_t step, bool last_step, double elapsed_agreed_hours) const;

  // Writes a checkpoint for `step`: each rank's `write_files(dir)` fills the temporary directory,
  // then rank 0 commits it. `elapsed_agreed_hours` restarts the every_hours clock. Returns the
  // committed directory.
  std::string save(int64_t step, double elapsed_agreed_hours, const std::function<void(const std::string& dir)>& write_files);

  // The newest checkpoint that is complete and intact: `latest` first, then older ones by step.
  // A damaged candidate is skipped with a line in `warnings` saying why.
  std::optional<std::string> find_resumable(std::vector<std::string>* warnings) const;

  static std::string step_dir_name(int64_t step);
  // Checks a checkpoint directory against its manifest; throws naming the file at fault.
  static void verify(const std::string& dir);
  // The step a checkpoint directory holds (from its manifest).
  static int64_t step_of(const std::string& dir);

 private:
  void commit(const std::string& tmp, const std::string& final_dir, int64_t step);
  void prune() const;
  std::vector<std::pair<int64_t, std::string>> committed() const;  // (step, dir), newest first

  CheckpointOptions options_;
  int rank_;
  std::function<void()> barrier_;
  double last_save_hours_ = 0;
};

}  // namespace dtrain

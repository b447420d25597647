// Checkpoint directories under checkpoint.dir, one per saved step ("step-00000100"), committed
// atomically: files go into "step-00000100.tmp", are fsynced and listed with their sizes and
// checksums in manifest.json, and the directory is renamed into place; the `latest` pointer (for
// people and tools) is rewritten last. A crash at any moment leaves every committed checkpoint intact.
// Every rank writes its own files into the same directory; rank 0 then adds what describes them all
// (a sharded checkpoint's index) and commits.
//
// Each manifest also says whether the checkpoint is healthy: taken at finite parameters and a
// finite, non-spiking loss. Pruning never removes the newest healthy checkpoint, and resuming
// prefers healthy ones, so a diverging run cannot push its last good state out.
//
// Each manifest names its lineage: the line of runs that continue one another's checkpoints in this
// directory. Pruning removes only checkpoints of the saving run's own lineage with steps below the
// one it just wrote, so it can never touch another run's checkpoints, nor later ones a branch
// started from (docs/training.md, "Which checkpoints a run continues and prunes").
#pragma once
#include <atomic>
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
  std::string lineage;       // written into each manifest; pruning removes only this lineage's checkpoints
  bool async = false;        // checkpoint.async: written on a thread of its own (train/checkpoint_saves.h)
};

struct CheckpointHealth {
  bool healthy = true;
  std::string note;  // why it is not
};

// What a committed checkpoint's manifest says about it.
struct CheckpointInfo {
  std::string dir;
  int64_t step = 0;
  CheckpointHealth health;
  std::string lineage;  // "" for checkpoints written before lineages were recorded
};

// Synchronises all ranks, each saying whether its part succeeded, and returns the ranks whose part
// failed (the same list on every rank). For one process: {} or {0}.
using AgreeOnFailures = std::function<std::vector<int>(bool ok)>;
// The agreement of a single process.
AgreeOnFailures agree_alone();

class CheckpointManager {
 public:
  // Rank 0 commits.
  CheckpointManager(CheckpointOptions options, int rank, AgreeOnFailures agree);

  // Whether to save after `step` (1-based count of finished steps). Every rank must get the same
  // answer, so time-triggered saves use rank 0's clock, which `elapsed_agreed_hours` carries.
  bool due(int64_t step, bool last_step, double elapsed_agreed_hours) const;
  // Restarts the every_hours clock, as save() does once it has saved. A save written on another
  // thread has it restarted on the thread that asks due(), when the save starts: due() must give
  // every rank the same answer, whenever each rank's background save ends.
  void restart_clock(double elapsed_agreed_hours) { last_save_hours_ = elapsed_agreed_hours; }

  // Writes a checkpoint for `step`: each rank's `write_files(dir)` fills the temporary directory;
  // once all have, rank 0's `finish(dir)` (when given) writes what describes them all (the index),
  // and rank 0 commits. `elapsed_agreed_hours` restarts the every_hours clock. Returns the committed
  // directory. A part that fails on any rank fails the save on every rank at once, naming the ranks,
  // and leaves nothing of it on disk.
  std::string save(int64_t step, double elapsed_agreed_hours, const CheckpointHealth& health,
                   const std::function<void(const std::string& dir)>& write_files,
                   const std::function<void(const std::string& dir)>& finish = {});

  // The newest checkpoint that verifies and that `load` accepts (it throws to refuse one; null
  // accepts all), healthy ones before unhealthy ones, and unhealthy ones only when `healthy_only` is
  // false. Each candidate passed over adds a line to `warnings` naming the file and the reason (an
  // unhealthy one only when it could have been taken: not for `healthy_only`).
  std::optional<CheckpointInfo> find_resumable(const std::function<void(const std::string& dir)>& load,
                                               std::vector<std::string>* warnings, bool healthy_only = false) const;
  // What a user names as a checkpoint (train.resume, generate --checkpoint): a step directory, which
  // must verify and which is then passed to `load`, or a checkpoint directory, whose newest usable
  // checkpoint find_resumable() picks (nullopt when it holds none). Throws std::invalid_argument
  // ("'PATH' does not exist", "... is not a directory") for the caller to prefix with what named it.
  static std::optional<CheckpointInfo> resolve(const std::string& path, const std::function<void(const std::string& dir)>& load,
                                               std::vector<std::string>* warnings);
  // resolve()'s first check, which reads nothing: that `path` is a directory. Throws as resolve() does.
  static void require_directory(const std::string& path);
  // Removes the "step-N.tmp" directories of saves a crash interrupted. Only while holding the lock.
  void remove_interrupted_saves() const;
  // The committed checkpoint directories with steps above `step`, newest first (names only: a damaged
  // one counts too, as a save of its step would replace it).
  std::vector<std::string> committed_after(int64_t step) const;
  void set_lineage(std::string lineage) { options_.lineage = std::move(lineage); }
  // A new lineage name, unique in practice: a run that continues no checkpoint of this directory.
  static std::string new_lineage();

  static std::string step_dir_name(int64_t step);
  // Checks a checkpoint directory against its manifest (every file's size and checksum, safetensors
  // headers, the step against the directory name) and every floating-point tensor for NaN and
  // infinity, which a checksum taken of poisoned weights does not catch; throws naming the file at
  // fault (and the tensor).
  static CheckpointInfo verify(const std::string& dir);
  // Reads manifest.json alone; throws naming it when it is missing or malformed.
  static CheckpointInfo read_manifest(const std::string& dir);

 private:
  void commit(const std::string& tmp, const std::string& final_dir, int64_t step, const CheckpointHealth& health);
  void prune(int64_t saved_step) const;
  std::vector<std::pair<int64_t, std::string>> committed() const;  // (step, dir), newest first

  CheckpointOptions options_;
  int rank_;
  AgreeOnFailures agree_;
  std::atomic<double> last_save_hours_{0};
};

}  // namespace dtrain

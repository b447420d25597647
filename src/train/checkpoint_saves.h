// The trainer's checkpoint saves: in the step (checkpoint.async false, the step waits for the whole
// save), or in the background (true: the step waits only while this rank's state is copied into host
// buffers, and ckpt/async_checkpoint_writer.h serialises, checksums, fsyncs and commits it while
// training goes on). One save at a time: the next waits for the one in flight, and says so.
//
// Each save's end is reported on the training thread: its log line, rank 0's metrics.jsonl line
// {"step": S, "checkpoint_stall_s": what the step waited, "checkpoint_write_s": how long the writing
// took, "checkpoint_wait_s": of the stall, the wait for the save before} and rank 0's export
// (export_hf_on_save). A background save that fails is thrown at the next step boundary, naming the
// rank and what failed; nothing of it is kept, and the checkpoints before it stay as they were.
#pragma once
#include <cstdint>
#include <future>
#include <optional>
#include <string>

#include "ckpt/async_checkpoint_writer.h"
#include "ckpt/checkpoint_manager.h"
#include "ckpt/host_copies.h"
#include "comm/world.h"
#include "train/metrics_log.h"
#include "train/parallelize.h"
#include "train/rank_log.h"
#include "train/train_config.h"

namespace dtrain {

// The agreement `config`'s saves need between the ranks: a collective over the world when the
// training thread writes them, the store when a background thread does, which must not issue
// collectives on the training's groups.
AgreeOnFailures checkpoint_agreement(const TrainConfig& config, World& world);

class CheckpointSaves {
 public:
  // `config` and the others outlive this; `metrics` is rank 0's (null on the others).
  CheckpointSaves(const TrainConfig& config, World& world, CheckpointManager& manager, RankLog& log, MetricsLog* metrics);
  ~CheckpointSaves() { release_held_save(); }

  // Saves the state after `step` (CheckpointManager::save's arguments; the plan's layout and
  // optimizer, and `progress`, say what).
  void save(int64_t step, double elapsed_agreed_hours, const CheckpointHealth& health, const ParallelPlan& plan,
            const TrainerProgress& progress);
  // At a step boundary: reports a background save that has ended; throws the error of one that failed.
  void poll();
  // Waits for the background save in flight and reports it: before the run ends or stops, and before
  // a rollback looks for the checkpoint to return to.
  void wait();
  // When a background save of this rank has failed unseen, `error` (another, which stops the run)
  // followed from it: the save's failure as poll would throw it, `error` beside it. Otherwise
  // nullopt, and a save that ended well stays for poll to report. Never waits and never throws: it
  // runs while `error` is being reported.
  std::optional<std::string> failed_save_behind(const std::string& error);

 private:
  // What the step that started a save knows of it.
  struct Started {
    int64_t step = 0;
    double stall_s = 0, waited_s = 0;
    bool healthy = true;
  };
  void collect(bool wait);
  // Lets a save that DTRAIN_INJECT_SLOW_SAVE holds back start writing.
  void release_held_save();
  // `write_s` absent: written in the step, which the stall measures whole.
  void report(const Started& save, const std::string& dir, std::optional<double> write_s);

  const TrainConfig& config_;
  World& world_;
  CheckpointManager& manager_;
  RankLog& log_;
  MetricsLog* metrics_;
  HostCopies copies_;
  Started in_flight_;
  std::string last_committed_;
  std::optional<std::promise<void>> held_;  // DTRAIN_INJECT_SLOW_SAVE: set when the training thread waits for the save
  AsyncCheckpointWriter writer_;  // last: destroyed first, it waits for the save in flight, which uses the others
};

}  // namespace dtrain

#include "train/checkpoint_saves.h"

#include <memory>
#include <stdexcept>

#include "ckpt/crash_points.h"
#include "common/elapsed.h"
#include "common/number_text.h"
#include "train/hf_weights.h"
#include "train/injected_faults.h"
#include "train/rank_agreement.h"
#include "train/training_state.h"

namespace dtrain {

namespace {

void fail_if_injected(int64_t step, const std::string& tmp) {
  if (save_failure_injected(step)) throw std::runtime_error("cannot write " + tmp + ": no space left on device (injected)");
}

}  // namespace

AgreeOnFailures checkpoint_agreement(const TrainConfig& config, World& world) {
  if (config.checkpoint.async)
    return ranks_that_failed_through_store(world, "checkpoint", std::chrono::milliseconds(int64_t(config.timeout_s * 1000)));
  return [&world](bool ok) { return ranks_that_failed(world, ok, "checkpoint"); };
}

CheckpointSaves::CheckpointSaves(const TrainConfig& config, World& world, CheckpointManager& manager, RankLog& log, MetricsLog* metrics)
    : config_(config), world_(world), manager_(manager), log_(log), metrics_(metrics) {}

void CheckpointSaves::save(int64_t step, double elapsed_agreed_hours, const CheckpointHealth& health, const ParallelPlan& plan,
                           const TrainerProgress& progress) {
  const auto t0 = SteadyClock::now();
  if (!config_.checkpoint.async) {
    const std::string dir = manager_.save(
        step, elapsed_agreed_hours, health,
        [&](const std::string& tmp) {
          fail_if_injected(step, tmp);
          save_training_state(tmp, world_.rank(), plan.layout, *plan.optimizer, progress, config_.json);
          crash_point("write", step);
        },
        [&](const std::string& tmp) { write_training_index(tmp, plan.layout, *plan.optimizer, config_.model); });
    report({step, seconds_since(t0), 0, health.healthy}, dir, std::nullopt);
    return;
  }
  const bool writing = writer_.writing();
  const int64_t previous = in_flight_.step;
  wait();  // reports the save before when it has ended unseen since the last step boundary
  const double waited_s = writing ? seconds_since(t0) : 0;
  if (writing)
    log_.info("checkpoint: the save of step " + std::to_string(step) + " waited " + fixed(waited_s, 3) + " s for the save of step " +
              std::to_string(previous) + " to be written (checkpoint.async writes one at a time)");
  manager_.restart_clock(elapsed_agreed_hours);
  const int64_t held = copies_.bytes();
  auto copy = std::make_shared<const TrainingStateCopy>(
      copy_training_state(copies_, world_.rank(), plan.layout, *plan.optimizer, progress, config_.json, config_.model));
  if (copies_.bytes() != held) log_.info("checkpoint.async: this rank's state is copied into " + mib(copies_.bytes()) + " MiB of host buffers");
  in_flight_ = {step, seconds_since(t0), waited_s, health.healthy};
  std::shared_future<void> released;
  if (slow_save_injected(step)) released = held_.emplace().get_future().share();
  writer_.start(step, [this, step, elapsed_agreed_hours, health, copy, released] {
    if (released.valid()) released.wait();
    return manager_.save(
        step, elapsed_agreed_hours, health,
        [&](const std::string& tmp) {
          fail_if_injected(step, tmp);
          save_training_state(tmp, *copy);
          crash_point("async_write", step);
        },
        [&](const std::string& tmp) { write_training_index(tmp, *copy); });
  });
}

void CheckpointSaves::poll() { collect(false); }

// A save DTRAIN_INJECT_SLOW_SAVE holds is let go only here, so the next save finds it being written.
void CheckpointSaves::wait() {
  release_held_save();
  collect(true);
}

std::optional<std::string> CheckpointSaves::failed_save_behind(const std::string& error) {
  if (!writer_.failed()) return std::nullopt;
  try {
    collect(false);
  } catch (const std::exception& e) {
    return std::string(e.what()) + " (then: " + error + ")";
  }
  return std::nullopt;
}

void CheckpointSaves::release_held_save() {
  if (held_) held_->set_value();
  held_.reset();
}

void CheckpointSaves::collect(bool wait) {
  std::optional<AsyncCheckpointWriter::Written> written;
  try {
    written = writer_.collect(wait);
  } catch (const std::exception& e) {
    throw std::runtime_error("the checkpoint of step " + std::to_string(in_flight_.step) + ", written in the background, failed on rank " +
                             std::to_string(world_.rank()) + ": " + e.what() + "; " +
                             (last_committed_.empty() ? std::string("no checkpoint of this run was committed before it")
                                                      : "the newest checkpoint stays " + last_committed_));
  }
  if (written) report(in_flight_, written->dir, written->write_s);
}

void CheckpointSaves::report(const Started& save, const std::string& dir, std::optional<double> write_s) {
  last_committed_ = dir;
  log_.info("checkpoint: " + dir + " (" +
            (write_s ? "the step waited " + fixed(save.stall_s, 3) + " s, written in the background in " + fixed(*write_s, 2) + " s"
                     : fixed(save.stall_s, 2) + " s") +
            ")" + (save.healthy ? "" : ", marked unhealthy"));
  if (metrics_)
    metrics_->write({{"step", save.step},
                     {"checkpoint_stall_s", save.stall_s},
                     {"checkpoint_write_s", write_s.value_or(save.stall_s)},
                     {"checkpoint_wait_s", save.waited_s}});
  // DeepSpeed's stage3_gather_16bit_weights_on_model_save writes a model file beside each save; here
  // rank 0 exports the committed checkpoint, in the run's precision, into its hf/ directory.
  if (config_.export_hf_on_save && world_.rank() == 0) export_save_to_hf(config_, dir, log_);
}

}  // namespace dtrain

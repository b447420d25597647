#include "train/trainer.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <optional>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/crash_points.h"
#include "ckpt/durable_file.h"
#include "comm/collectives.h"
#include "common/elapsed.h"
#include "common/number_text.h"
#include "common/store_bytes.h"
#include "data/micro_batch_stream.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint_saves.h"
#include "train/config_preflight.h"
#include "train/hf_weights.h"
#include "train/host_memory.h"
#include "train/evaluation.h"
#include "train/injected_faults.h"
#include "train/batch_policy.h"
#include "train/metrics_log.h"
#include "train/operator_profile.h"
#include "train/optimizer_step.h"
#include "train/parallelize.h"
#include "train/rank_agreement.h"
#include "train/rank_log.h"
#include "train/rank_runtime.h"
#include "train/replica_checks.h"
#include "train/membership_change.h"
#include "train/memory_report.h"
#include "train/resume_choice.h"
#include "train/run_dataset.h"
#include "train/run_directories.h"
#include "train/run_trace.h"
#include "train/run_mesh.h"
#include "train/stability_guard.h"
#include "train/step_executor.h"
#include "train/step_report.h"
#include "train/training_state.h"

namespace dtrain {

namespace {

// The exit code of a run stopped because training diverged (docs/training.md).
constexpr int kDivergedExitCode = 3;

// The job of one rank, in the order train() runs it: data, model and its parallel plan, the run
// directory, resume or start, then steps with evaluation, divergence recovery and checkpoints. What
// each part does lives in a file of its own (parallelize, step_executor, optimizer_step,
// step_report, replica_checks, resume_choice, run_directories); this class holds their state.
class Trainer {
 public:
  Trainer(const TrainConfig& config, std::shared_ptr<World> world)
      : c_(config),
        world_(std::move(world)),
        log_(world_->rank(), world_->rank() == 0),
        membership_(world_->env().previous_world_size, world_->env().failure_time) {}

  int run();

 private:
  int train();
  std::string agree(const std::string& key, const std::function<std::string()>& decide) { return dtrain::agree(*world_, key, decide); }
  void setup_run_dir();
  void build_data();
  void build_model();
  void resume_or_start();
  // Loads a checkpoint into the model, optimizer and progress_ (every check first).
  void read_checkpoint(const std::string& dir);
  // After read_checkpoint on rank 0 (which checked it) or here on the others: the data position and
  // metrics follow.
  void load_checkpoint(const std::string& dir);
  void continue_lineage(const std::string& resumed_from);
  void train_step(int64_t step);
  bool recover_from_divergence(int64_t step, const std::string& why);
  // Logs why this rank stops; throws the cause instead when it is this rank's failed background save
  // that the others learned of first (CheckpointSaves::failed_save_behind).
  void log_fatal(const std::string& error);
  void save(int64_t step);

  TrainConfig c_;
  std::shared_ptr<World> world_;
  RankLog log_;
  std::shared_ptr<DeviceMesh> mesh_;  // the layout of config.parallel over the world
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<StepReport> report_;  // once the run directory holds the metrics
  std::unique_ptr<MemoryReport> memory_;  // the steps' measured peak against the estimate
  std::shared_ptr<const SampleDataset> dataset_;
  std::unique_ptr<MicroBatchStream> stream_;
  MembershipChange membership_;
  Transformer model_{nullptr};
  ParallelPlan plan_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<RunTrace> trace_;  // train.trace
  std::unique_ptr<OperatorProfile> profile_;  // train.profile_steps
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<StabilityGuard> guard_;
  std::unique_ptr<CheckpointManager> checkpoints_;
  std::unique_ptr<CheckpointSaves> saves_;  // after checkpoints_, whose saves it may be writing when destroyed
  ClaimedRun claimed_;  // rank 0's: the directory locks and what this start resumes
  std::string last_unhealthy_reason_;
  std::vector<std::string> setup_lines_;  // logged once the run directory (and its logs) exist
  TrainerProgress progress_;
  SteadyClock::time_point start_ = SteadyClock::now();
};

void Trainer::setup_run_dir() {
  c_.run_dir = agree("trainer/setup", [this] {
    claimed_ = claim_run_directories(c_, world_->env().restart_count);
    setup_lines_.insert(setup_lines_.end(), claimed_.notes.begin(), claimed_.notes.end());
    return c_.run_dir;
  });
  // For the launcher, which names the run directory in its failure report.
  if (world_->rank() == 0) world_->store()->set("trainer/run_dir", as_bytes(c_.run_dir));
  c_.checkpoint.dir = c_.checkpoint_dir();
  c_.json["train"]["run_dir"] = c_.run_dir;
  c_.json["checkpoint"]["dir"] = c_.checkpoint.dir;
  c_.json["dist"]["backend"] = world_->backend();
  log_.open(c_.run_dir);
  if (world_->rank() == 0) metrics_ = std::make_unique<MetricsLog>(c_.run_dir + "/metrics.jsonl");
  report_ = std::make_unique<StepReport>(c_, log_, metrics_.get());
}

void Trainer::build_data() {
  RunDataset data = load_run_dataset(c_);
  dataset_ = std::move(data.samples);
  const ShuffleOrder order = resolve_shuffle_order(c_.shuffle_order, dataset_->size(Split::Train));
  c_.json["data"]["shuffle_order"] = shuffle_order_name(order);
  stream_ = std::make_unique<MicroBatchStream>(dataset_, mesh_->size("dp"), mesh_->coord("dp"), int(c_.micro_batch), c_.accumulation,
                                               SamplerOptions{c_.shuffle, c_.seed, true, order});
  setup_lines_.push_back("data: " + data.description);
}

void Trainer::build_model() {
  plan_ = parallelize(model_, *world_, mesh_, c_);
  setup_lines_.insert(setup_lines_.end(), plan_.setup_lines.begin(), plan_.setup_lines.end());
  schedule_ = std::make_unique<LrSchedule>(c_.scheduler, plan_.optimizer->base_lr(), c_.steps);
  guard_ = std::make_unique<StabilityGuard>(c_.stability);
  memory_ = std::make_unique<MemoryReport>(c_, *world_, mesh_->coord("pp"));
}

void Trainer::read_checkpoint(const std::string& dir) {
  plan_.optimizer->finish_parameter_updates();  // no gather may write into what is loaded
  progress_ = load_training_state(dir, plan_.layout, *plan_.optimizer, [this](const std::string& line) { log_.info(line); });
  plan_.evict_offloaded();
  progress_.batch_lr_scale *= batch_lr_factor(c_, read_json_file(dir + "/config.json"));
}

void Trainer::load_checkpoint(const std::string& dir) {
  // Rank 0 loaded it while choosing it; the others read their own pieces now, and a rank that cannot
  // stops every rank here, rather than leaving the others waiting in the next collective.
  std::exception_ptr error;
  try {
    if (world_->rank() != 0 && load_failure_injected(CheckpointManager::read_manifest(dir).step))
      throw std::runtime_error("cannot read " + dir + ": input/output error (injected)");
    if (world_->rank() != 0) read_checkpoint(dir);
  } catch (...) {
    error = std::current_exception();
  }
  const std::vector<int> failed = ranks_that_failed(*world_, !error, "checkpoint load");
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw std::runtime_error("rank " + std::to_string(failed.front()) + " could not load " + dir + " (its log says why), so this rank stops too");
  if (plan_.scaler) plan_.scaler = std::make_unique<LossScaler>(c_.loss_scaler);  // a rollback forgets what came after
  restore_loss_scaler(plan_.scaler.get(), progress_, model_->precision(), log_);
  stream_->restore(progress_.data);
  if (metrics_) membership_.redoes(metrics_->forget_after(progress_.step));
}

// A run that continues a checkpoint of its own checkpoint.dir continues its lineage, which its saves
// may prune; any other start is a lineage of its own, which prunes nothing it did not write.
void Trainer::continue_lineage(const std::string& resumed_from) {
  const bool own = !resumed_from.empty() && resumes_within(resumed_from, c_.checkpoint.dir);
  checkpoints_->set_lineage(own ? CheckpointManager::read_manifest(resumed_from).lineage : CheckpointManager::new_lineage());
}

void Trainer::resume_or_start() {
  checkpoints_ = std::make_unique<CheckpointManager>(c_.checkpoint, world_->rank(), checkpoint_agreement(c_, *world_));
  saves_ = std::make_unique<CheckpointSaves>(c_, *world_, *checkpoints_, log_, metrics_.get());
  if (world_->rank() == 0) checkpoints_->remove_interrupted_saves();
  const auto t0 = SteadyClock::now();  // rank 0 loads the checkpoint it chooses while choosing it
  const std::string from = agree("trainer/resume", [this] {
    return choose_checkpoint(claimed_.start, *checkpoints_, c_, [this](const std::string& dir) { read_checkpoint(dir); }, log_);
  });
  if (world_->rank() == 0) continue_lineage(from);
  if (!from.empty()) {
    load_checkpoint(from);
    const double load_s = seconds_since(t0);  // until every rank has loaded its pieces
    const nlohmann::json saved = read_json_file(from + "/config.json");
    resume_global_batch(c_, from, saved, log_);
    stream_->set_micro_batches_per_step(c_.accumulation);
    membership_.resumed_from(saved);
    warn_of_resume_changes(c_, from, saved, *schedule_, progress_, log_);
    log_.info("resumed from " + from + " at step " + std::to_string(progress_.step) + " (load " + fixed(load_s, 2) + " s" +
              (progress_.lr_scale < 1 ? ", learning rate scaled by " + fixed(progress_.lr_scale, 4) + " after rollbacks" : "") + ")" +
              (progress_.precision != precision_name(c_.precision)
                   ? "; it was saved by a " + progress_.precision + " run, and its fp32 weights continue in " + precision_name(c_.precision)
                   : ""));
  }
  // A resumed run continues its checkpoint, which already started from model.init_from.
  if (from.empty() && !c_.init_from.empty()) load_init_from(c_, plan_, *world_, log_);
  // The run directory's config.json says what this start did: the checkpoint it resumed, or never.
  c_.json["train"]["resume"] = from.empty() ? "never" : from;
  if (world_->rank() == 0) write_file_atomically(c_.run_dir + "/config.json", c_.json.dump(2));
  // Every replica starts from the first one's parameters (at stage 3 each rank loaded its own shard,
  // and a fresh start broadcast the units when they were built).
  std::vector<at::Tensor> parameters = plan_.replicated_parameters();
  broadcast(*mesh_->group("dp_cp"), parameters, 0, "broadcast parameters");
}

void Trainer::train_step(int64_t step) {
  const auto t0 = SteadyClock::now();
  if (c_.wall_clock_breakdown) plan_.start_trace();
  StepOutcome out;
  const bool inject = plan_.scaler && overflow_injected(step + 1);
  out.loss_scale = plan_.scaler ? plan_.scaler->scale() : 0;
  out.passes = executor_->run(step + 1, plan_.scaler ? std::optional<double>(inject ? INFINITY : out.loss_scale) : std::nullopt);
  // The loss averaged over the data-parallel ranks and their images' FLOPs summed, in one collective.
  auto reduced = at::tensor({out.passes.loss, out.passes.image_flops}, at::kDouble).to(world_->device());
  all_reduce(*mesh_->group("dp_cp"), reduced, ReduceOp::Avg, "loss");
  const at::Tensor averaged = reduced.cpu();
  out.loss = averaged[0].item<double>();
  out.image_flops = averaged[1].item<double>() * double(mesh_->group("dp_cp")->size());
  out.lr = schedule_->lr(step) * progress_.lr_scale * progress_.batch_lr_scale;
  out.update = apply_optimizer_step(plan_, *guard_, out.loss, out.loss_scale, out.lr, c_.gradient_clipping);
  crash_point("optimizer", step + 1);
  if (!out.update.reason.empty()) last_unhealthy_reason_ = "step " + std::to_string(step + 1) + ": " + out.update.reason;
  if (!out.update.applied()) ++progress_.skipped_steps;
  progress_.step = step + 1;
  progress_.data = stream_->position();
  progress_.tokens_seen += double(c_.global_batch * c_.model.seq_len);
  out.step_s = seconds_since(t0);
  membership_.first_step_done(step, world_->size(), metrics_.get(), log_);
  report_->step(step, out, plan_);
}

void Trainer::save(int64_t step) {
  const CheckpointHealth health{guard_->last_step_healthy(), guard_->last_step_healthy() ? "" : last_unhealthy_reason_};
  check_replicas_agree(plan_, *world_, step, replica_drift_injected(step));
  progress_.precision = precision_name(c_.precision);
  progress_.loss_scaler = plan_.scaler ? plan_.scaler->state() : nlohmann::json();
  // every_hours must trigger on every rank at once: rank 0's clock decides.
  saves_->save(step, seconds_since(start_) / 3600.0, health, plan_, progress_);
}

// After divergence: with train.on_divergence=rollback (and rollbacks left), reloads the newest
// healthy checkpoint, lowers the learning rate and returns true; otherwise says where the last good
// state is and returns false.
bool Trainer::recover_from_divergence(int64_t step, const std::string& why) {
  log_.warn("training diverged at step " + std::to_string(step) + ": " + why);
  const bool rollback_left = c_.on_divergence == "rollback" && progress_.rollbacks < c_.max_rollbacks;
  if (rollback_left) {
    const TrainerProgress before = progress_;
    const std::string dir = agree("trainer/rollback/" + std::to_string(before.rollbacks), [&] {
      std::vector<std::string> warnings;
      const auto found =
          checkpoints_->find_resumable([this](const std::string& d) { read_checkpoint(d); }, &warnings, /*healthy_only=*/true);
      for (const auto& w : warnings) log_.warn(w);
      return found ? found->dir : "";
    });
    if (!dir.empty()) {
      load_checkpoint(dir);
      progress_.lr_scale = before.lr_scale * c_.rollback_lr_factor;
      progress_.rollbacks = before.rollbacks + 1;
      guard_->restart();
      log_.warn("rolled back to " + dir + " (step " + std::to_string(progress_.step) + "), learning rate scaled by " +
                fixed(progress_.lr_scale, 4) + " (rollback " + std::to_string(progress_.rollbacks) + " of " +
                std::to_string(c_.max_rollbacks) + ")");
      return true;
    }
  }
  // A rollback that found nothing has searched already: the same search would find nothing again.
  const auto good = rollback_left ? std::nullopt : last_good_checkpoint(*world_, *checkpoints_, "divergence", log_);
  std::string advice = good ? "the last good checkpoint is " + good->dir + " (step " + std::to_string(good->step) +
                                  "): resume from it with a lower learning rate (--set train.resume=" + good->dir + ")"
                     : rollback_left ? "no healthy, undamaged checkpoint to roll back to"
                                     : "no healthy, undamaged checkpoint was taken before it";
  if (c_.on_divergence == "rollback" && !rollback_left)
    advice = "no rollback left (" + std::to_string(progress_.rollbacks) + " of train.max_rollbacks " + std::to_string(c_.max_rollbacks) +
             " used); " + advice;
  log_.error("stopping: training diverged at step " + std::to_string(step) + "; " + advice);
  return false;
}

int Trainer::run() {
  try {
    const int code = train();
    if (trace_) trace_->write(c_.run_dir);  // every end a rank returns from, all ranks alike
    return code;
  } catch (const c10::Error& e) {
    log_fatal(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    log_fatal(e.what());
    throw;
  }
}

void Trainer::log_fatal(const std::string& error) {
  const auto cause = saves_ ? saves_->failed_save_behind(error) : std::nullopt;
  log_.fatal(cause.value_or(error));
  if (cause) throw std::runtime_error(*cause);
}

int Trainer::train() {
  arm_crash_points(c_.inject_failure);
  configure_rank_runtime(c_, *world_, setup_lines_);
  // Inputs are checked before the run directory exists, so a bad start leaves nothing on disk.
  mesh_ = make_run_mesh(*world_, c_, setup_lines_);
  build_data();
  build_model();
  setup_run_dir();
  log_.info("dtrain train: rank " + std::to_string(world_->rank()) + " of " + std::to_string(world_->size()) + ", backend " +
            world_->world_group()->backend_name() + ", " + std::to_string(at::get_num_threads()) + " thread(s) per rank, run dir " + c_.run_dir);
  for (const auto& line : setup_lines_) log_.info(line);
  if (world_->rank() == 0)
    for (const auto& warning : c_.warnings) log_.warn(warning);
  resume_or_start();
  // After the resume, which may change the accumulation to keep the checkpoint's global batch.
  if (c_.trace) trace_ = std::make_unique<RunTrace>(*world_);
  executor_ = make_step_executor(model_, plan_, *stream_, c_, world_->device(), trace_ ? trace_->trace() : nullptr);
  profile_ = OperatorProfile::for_start(c_, world_->rank(), progress_.step, world_->device(), log_);

  report_->measure_peak(*world_);
  if (progress_.step >= c_.steps) {
    log_.info("nothing to do: the checkpoint is at step " + std::to_string(progress_.step) + " of train.steps " + std::to_string(c_.steps));
    return 0;
  }
  log_.info("training steps " + std::to_string(progress_.step + 1) + ".." + std::to_string(c_.steps) +
            " (matmul peak " + fixed(report_->peak_flops() / 1e9, 1) + " GFLOP/s over all ranks" +
            (c_.peak_flops > 0 ? ", train.peak_flops" : ", " + precision_name(model_->precision().native_gemm ? c_.precision : at::kFloat) + " GEMMs") + ")");
  const int64_t released = release_freed_host_memory();
  if (released >= (1 << 20)) log_.info("host memory: " + mib(released) + " MiB that setting up freed given back to the kernel");
  start_ = SteadyClock::now();
  const auto first = progress_.step;
  while (progress_.step < c_.steps) {
    const int64_t step = progress_.step;
    memory_->step_begins();
    if (profile_) profile_->step_begins(step + 1);
    train_step(step);
    if (profile_) profile_->step_ends(step + 1);
    memory_->step_ends();
    crash_point("step", step + 1);
    saves_->poll();
    const bool last = step + 1 == c_.steps;
    if (c_.eval_every > 0 && ((step + 1) % c_.eval_every == 0 || last)) {
      if (const auto val = validation_loss(model_, plan_, *executor_, *dataset_, c_, *world_)) {
        log_.info("step " + std::to_string(step + 1) + " | validation loss " + fixed(*val, 4));
        if (metrics_) metrics_->write({{"step", step + 1}, {"val_loss", *val}});
      }
    }
    const bool stop = c_.stop_at_step > 0 && step + 1 == c_.stop_at_step && !last;
    const bool save_due = stop || checkpoints_->due(step + 1, last, seconds_since(start_) / 3600.0);
    // A checkpoint of non-finite parameters is never written: it would only carry the divergence on.
    std::string diverged;
    if (guard_->diverged())
      diverged = std::to_string(guard_->consecutive_unhealthy()) + " consecutive steps skipped or spiking (train.divergence_steps); last: " +
                 last_unhealthy_reason_;
    else if (save_due && !parameters_finite(plan_, *world_))
      diverged = "the parameters are no longer finite";
    if (!diverged.empty()) {
      saves_->wait();
      if (recover_from_divergence(step + 1, diverged)) continue;
      return kDivergedExitCode;
    }
    if (save_due) save(step + 1);
    // The step, the finiteness check and the save read the whole shard; on NVMe it leaves memory now.
    plan_.evict_offloaded();
    if (stop) {
      saves_->wait();
      log_.info("stopping after step " + std::to_string(step + 1) + " as train.stop_at_step asks; resume continues from here");
      return 0;
    }
  }
  saves_->wait();
  plan_.optimizer->finish_parameter_updates();
  if (!guard_->last_step_healthy()) {
    const auto good = last_good_checkpoint(*world_, *checkpoints_, "end", log_);
    log_.warn("the run ended on an unhealthy step (" + last_unhealthy_reason_ + "); " +
              (good ? "the last healthy checkpoint is " + good->dir : std::string("no checkpoint is healthy and undamaged")));
  }
  memory_->finish(c_.steps, log_, metrics_.get());
  log_.info(report_->summary(c_.steps - first, seconds_since(start_), plan_, *guard_, progress_.rollbacks, world_->rank()));
  return 0;
}

}  // namespace

int run_trainer(const TrainConfig& config, std::shared_ptr<World> world) {
  Trainer trainer(config, std::move(world));
  return trainer.run();
}

}  // namespace dtrain

#include "train/trainer.h"

#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/crash_points.h"
#include "ckpt/directory_lock.h"
#include "ckpt/durable_file.h"
#include "comm/collectives.h"
#include "comm/device_mesh.h"
#include "common/printable.h"
#include "common/store_bytes.h"
#include "data/micro_batch_stream.h"
#include "launch/host_capacity.h"
#include "data/token_source.h"
#include "optim/flat_optimizer.h"
#include "optim/grad_clip.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/ddp/data_parallel.h"
#include "parallel/zero/fully_sharded_parameters.h"
#include "parallel/zero/host_offload_optimizer.h"
#include "parallel/zero/nvme_optimizer.h"
#include "parallel/zero/parameter_units.h"
#include "parallel/zero/reduce_scatter_grads.h"
#include "parallel/zero/zero_optimizer.h"
#include "train/freeze_globs.h"
#include "train/host_memory.h"
#include "train/injected_faults.h"
#include "train/matmul_peak.h"
#include "train/metrics_log.h"
#include "train/parameter_fingerprint.h"
#include "train/rank_log.h"
#include "train/run_start.h"
#include "train/stability_guard.h"
#include "train/training_state.h"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// A loss scale as the user wrote it: 65536, 0.5.
std::string scale_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string scientific(double v) {
  std::ostringstream s;
  s << std::scientific << std::setprecision(2) << v;
  return s.str();
}

// The exit code of a run stopped because training diverged (docs/training.md).
constexpr int kDivergedExitCode = 3;

// Bytes as MiB with one decimal: "472.0".
std::string mib(int64_t bytes) { return fixed(double(bytes) / (1 << 20), 1); }

// Makes what offloads to NVMe under the offload section `key`; a path it cannot use
// (std::invalid_argument) is named by the key.
template <typename Make>
void offload_to_nvme(const std::string& key, Make make) {
  try {
    make();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(key + ".nvme_path: " + e.what());
  }
}

std::string rate(double tokens_per_s) {
  return tokens_per_s >= 1e6 ? fixed(tokens_per_s / 1e6, 2) + "M" : fixed(tokens_per_s / 1e3, 1) + "k";
}

// What one optimizer step did, for the metrics and the progress line.
struct StepOutcome {
  double loss = 0, lr = 0, grad_norm = 0, step_s = 0;
  StepVerdict verdict = StepVerdict::Apply;
  std::string reason;      // why the guard did not simply apply it
  bool overflow = false;   // fp16: the gradients overflowed, so the step was skipped
  double loss_scale = 0;   // fp16: the scale this step's loss was multiplied by
  double comm_s = 0, hidden_s = 0;  // gradient reduction, over every synchronised micro-batch
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, std::shared_ptr<World> world)
      : c_(config), world_(std::move(world)), log_(world_->rank(), world_->rank() == 0) {}

  int run();

 private:
  int train();
  std::string agree(const std::string& key, const std::function<std::string()>& decide);
  void claim_directories();
  void setup_run_dir();
  void build_data();
  void build_model();
  void resume_or_start();
  std::vector<int> ranks_that_failed(bool ok, const std::string& what);
  std::unique_ptr<ElementwiseOptimizer> make_shard_optimizer(int64_t numel);
  std::unique_ptr<ElementwiseOptimizer> make_nvme_optimizer(int64_t numel, at::TensorOptions options);
  void keep_shard_on_nvme();
  std::string choose_checkpoint();
  void continue_lineage(const std::string& resumed_from);
  void keep_global_batch(const std::string& dir, const nlohmann::json& saved);
  void warn_if_schedule_changed(const std::string& dir, const nlohmann::json& saved);
  void warn_if_order_changed(const std::string& dir, const nlohmann::json& saved);
  // Loads a checkpoint into the model, optimizer and progress_ (every check first).
  void read_checkpoint(const std::string& dir);
  // After read_checkpoint on rank 0 (which checked it) or here on the others: the data position and
  // metrics follow.
  void load_checkpoint(const std::string& dir);
  void train_step(int64_t step);
  std::optional<double> evaluate();
  bool parameters_finite();
  bool recover_from_divergence(int64_t step, const std::string& why);
  std::optional<CheckpointInfo> last_good_checkpoint(const std::string& why);
  void save(int64_t step);
  void check_replicas_agree(int64_t step);
  void report_step(int64_t step, const StepOutcome& outcome);
  void restore_loss_scaler(const nlohmann::json& saved);
  int threads() const;

  TrainConfig c_;
  std::shared_ptr<World> world_;
  RankLog log_;
  std::unique_ptr<MetricsLog> metrics_;
  std::shared_ptr<TokenDataset> dataset_;
  std::unique_ptr<MicroBatchStream> stream_;
  Transformer model_{nullptr};
  std::vector<at::Tensor> frozen_;
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<FlatOptimizer> optimizer_;
  StateLayout layout_;  // what of the parameters and optimizer state this rank holds, loads and saves
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<BucketedGradSync> grad_sync_;
  std::unique_ptr<FullyShardedParameters> sharded_;  // ZeRO stage 3 only
  ParameterAllGather* parameter_gather_ = nullptr;    // ZeRO stages 1 and 2 only; owned by optimizer_
  std::unique_ptr<DeviceMesh> hybrid_mesh_;           // hybrid sharding only: replicate x shard
  std::unique_ptr<StabilityGuard> guard_;
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  std::unique_ptr<CheckpointManager> checkpoints_;
  std::unique_ptr<DirectoryLock> run_lock_, checkpoint_lock_;  // rank 0's, for the run's life
  StartPlan start_plan_;  // rank 0's: what this start resumes, decided once the directories are locked
  std::string last_unhealthy_reason_;
  std::vector<std::string> setup_lines_;  // logged once the run directory (and its logs) exist
  TrainerProgress progress_;
  double peak_flops_ = 0;  // all ranks together
  Clock::time_point start_ = Clock::now();
  double step_seconds_sum_ = 0;
  int64_t steps_timed_ = 0;
  double comm_s_ = 0, hidden_s_ = 0;
};

int Trainer::threads() const {
  if (c_.threads > 0) return c_.threads;
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0) return std::atoi(omp);
  return std::max(1, usable_cores() / std::max(1, world_->env().local_world_size));
}

std::string Trainer::agree(const std::string& key, const std::function<std::string()>& decide) {
  auto store = world_->store();
  if (world_->rank() == 0) {
    try {
      const std::string value = decide();
      store->set(key, as_bytes("ok:" + value));
      return value;
    } catch (const ConfigError& e) {
      store->set(key, as_bytes(std::string("config:") + e.what()));
      throw;
    } catch (const std::exception& e) {
      store->set(key, as_bytes(std::string("error:") + e.what()));
      throw;
    }
  }
  const std::string reply = as_string(store->get(key));
  if (reply.rfind("ok:", 0) == 0) return reply.substr(3);
  const std::string why = "rank 0 failed, so this rank stops too: " + reply.substr(reply.find(':') + 1);
  // Every rank exits as rank 0 does, so the launcher sees a refused configuration whichever rank ends first.
  if (reply.rfind("config:", 0) == 0) throw ConfigError(why);
  throw std::runtime_error(why);
}

// Rank 0 locks the run and checkpoint directories before writing anything into them, so two runs
// never share one; a lock left by a dead run is taken over (the kernel released it).
void Trainer::claim_directories() {
  namespace fs = std::filesystem;
  if (c_.run_dir.empty()) c_.run_dir = default_run_dir();
  const std::string ckpt = c_.checkpoint_dir();
  for (const auto& [dir, key] : {std::pair{c_.run_dir, "train.run_dir"}, std::pair{ckpt, "checkpoint.dir"}}) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw ConfigError(std::string(key) + ": '" + printable(dir) + "' exists and is not a directory");
  }
  auto claim = [this](const std::string& dir, const std::string& what) {
    fs::create_directories(dir);
    std::string previous;
    auto lock = std::make_unique<DirectoryLock>(dir, what, &previous);
    if (!previous.empty())
      setup_lines_.push_back("took over the lock of " + printable(dir) + " from " + previous + ", which is no longer running");
    return lock;
  };
  run_lock_ = claim(c_.run_dir, "run directory");
  std::error_code ec;  // a checkpoint directory that does not exist yet is not the run directory
  if (!fs::equivalent(ckpt, c_.run_dir, ec)) checkpoint_lock_ = claim(ckpt, "checkpoint directory");
  start_plan_ = plan_start(c_, world_->env().restart_count);
  setup_lines_.insert(setup_lines_.end(), start_plan_.notes.begin(), start_plan_.notes.end());
}

void Trainer::setup_run_dir() {
  c_.run_dir = agree("trainer/setup", [this] {
    claim_directories();
    return c_.run_dir;
  });
  if (world_->rank() == 0) {  // for the launcher, which names the run directory in its failure report
    world_->store()->set("trainer/run_dir", as_bytes(c_.run_dir));
  }
  c_.checkpoint.dir = c_.checkpoint_dir();
  c_.json["train"]["run_dir"] = c_.run_dir;
  c_.json["checkpoint"]["dir"] = c_.checkpoint.dir;
  c_.json["dist"]["backend"] = world_->backend();
  log_.open(c_.run_dir);
  if (world_->rank() == 0) metrics_ = std::make_unique<MetricsLog>(c_.run_dir + "/metrics.jsonl");
}

void Trainer::build_data() {
  TokenSource source = load_tokens(c_.data_source);
  if (!source.warning.empty()) std::cerr << "warning: " << source.warning << "\n";
  dataset_ = std::make_shared<TokenDataset>(source.tokens, c_.model.seq_len, c_.val_fraction, c_.model.vocab_size);
  const ShuffleOrder order = resolve_shuffle_order(c_.shuffle_order, dataset_->size(Split::Train));
  c_.json["data"]["shuffle_order"] = shuffle_order_name(order);
  stream_ = std::make_unique<MicroBatchStream>(dataset_, c_.dp, world_->rank(), int(c_.micro_batch),
                                               SamplerOptions{c_.shuffle, c_.seed, true, order});
  setup_lines_.push_back("data: " + source.description + " -> " + std::to_string(dataset_->size(Split::Train)) + " training and " +
            std::to_string(dataset_->size(Split::Validation)) + " validation samples of " + std::to_string(c_.model.seq_len) + " tokens");
}

void Trainer::build_model() {
  model_ = Transformer(c_.model, c_.seed);
  model_->set_activation_checkpointing(c_.activation_checkpointing);
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::vector<std::string> names;
  int64_t frozen_count = 0;
  for (auto& item : model_->named_parameters()) {
    for (const auto& glob : c_.freeze) {
      if (!freeze_glob_matches(glob, item.key()) || !item.value().requires_grad()) continue;  // or frozen by an earlier glob
      item.value().requires_grad_(false);
      frozen_.push_back(item.value());
      frozen_count += item.value().numel();
    }
    named.emplace_back(item.key(), item.value());
    names.push_back(item.key());
  }
  require_freeze_globs_match(c_.freeze, names);
  // Moving keeps each parameter's identity (its data is replaced), so `named` and `frozen_` stay valid.
  model_->to(world_->device());
  MixedPrecision precision = MixedPrecision::make(c_.precision, world_->device());
  precision.round_gradients = c_.grad_accum_16bit;
  model_->set_precision(precision);
  if (c_.precision == at::kHalf) scaler_ = std::make_unique<LossScaler>(c_.loss_scaler);
  const std::vector<at::Tensor> matmul_only = model_->matmul_only_weights();
  named = group_matmul_weights(named, c_.model.n_layer, matmul_only);
  // Stages 2 and 3 keep no whole gradient: autograd's per-parameter gradients go into reduce-scatter
  // buckets. Stage 3 keeps no whole parameters either: they move into per-unit buffers.
  flat_ = std::make_unique<FlatParameters>(named, c_.zero_stage == 3   ? FlatParameters::Buffers::None
                                                  : c_.zero_stage == 2 ? FlatParameters::Buffers::Parameters
                                                                       : FlatParameters::Buffers::ParametersAndGradients);
  DataParallelOptions ddp_options;
  ddp_options.bucket_bytes = c_.reduce_bucket_elements * flat_->options().dtype().itemsize();
  if (c_.grad_accum_16bit) ddp_options.wire_dtype = c_.precision;
  // Hybrid sharding shards within a group of ranks (a node) and replicates across the groups.
  auto group = world_->world_group();
  if (c_.shard_group_size != 0) {
    const int size = c_.shard_group_size == TrainConfig::kShardGroupPerNode ? world_->env().local_world_size : c_.shard_group_size;
    if (size < 1 || c_.dp % size != 0)
      throw ConfigError("parallel.fsdp.shard_group_size: a node's " + std::to_string(size) + " rank(s) do not divide the " +
                        std::to_string(c_.dp) + " data-parallel ranks; give the size");
    c_.json["parallel"]["fsdp"]["shard_group_size"] = size;
    hybrid_mesh_ = std::make_unique<DeviceMesh>(*world_, std::vector<std::pair<std::string, int>>{{"replicate", c_.dp / size}, {"shard", size}});
    group = hybrid_mesh_->group("shard");
  }
  if (c_.zero_stage == 3) {
    const auto units = make_unit_buckets(flat_->entries(), c_.model.n_layer, precision.enabled() ? matmul_only : std::vector<at::Tensor>{});
    if (!world_->device().is_cpu() && c_.offload_param.device != "none" && c_.offload_optimizer.device == "none")
      throw ConfigError("zero_optimization.offload_param.device=" + c_.offload_param.device + " on a " + world_->device().str() +
                        " run needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" too: the optimizer updates the " +
                        "parameter shard where it lives, on the host");
    // Sharded before anything else of the model's size is allocated: a whole model beside the
    // sharded state would be this rank's peak. Every rank starts from rank 0's parameters.
    sharded_ = std::make_unique<FullyShardedParameters>(*flat_, units, c_.model.n_layer, group, c_.reshard_after_forward);
    if (c_.offload_param.device == "nvme") keep_shard_on_nvme();
    if (c_.offload_param.device == "cpu" && !world_->device().is_cpu()) {
      sharded_->keep_shard_on_host();
      setup_lines_.push_back("zero_optimization.offload_param.device=cpu: the parameter shard (" + mib(sharded_->shard().nbytes()) +
                             " MiB) in host memory, copied to the " + world_->device().str() + " piece by piece as each unit is gathered");
    }
    if (precision.enabled()) {
      std::vector<ParamGroup> groups = model_->matmul_groups();
      std::vector<std::pair<at::Tensor, at::Tensor*>> working;
      for (auto& g : groups) working.emplace_back(g->weight, &g->working);
      sharded_->keep_working_copies(precision.compute, working, matmul_only, c_.gather_16bit);
    }
    broadcast(*world_->world_group(), sharded_->unit_buffers(), 0, "broadcast parameters");
    sharded_->reshard();
    auto reduce_scatter = std::make_unique<ReduceScatterGrads>(*flat_, group, ddp_options, units);
    if (hybrid_mesh_) reduce_scatter->average_across(hybrid_mesh_->group("replicate"));
    reduce_scatter->on_gradients_taken([this](int unit) { sharded_->gradients_taken(unit); });
    grad_sync_ = std::move(reduce_scatter);
    model_->set_part_hooks(sharded_.get());
  } else if (c_.zero_stage == 2) {
    grad_sync_ = std::make_unique<ReduceScatterGrads>(*flat_, group, ddp_options);
  } else {
    grad_sync_ = std::make_unique<DataParallel>(*flat_, group, ddp_options);
  }
  for (const auto& [what, device] : {std::pair<std::string, std::string>{"optimizer", c_.offload_optimizer.device},
                                     {"param", c_.offload_param.device}}) {
    if (device == "cpu" && world_->device().is_cpu())
      setup_lines_.push_back("zero_optimization.offload_" + what + ".device=cpu: this run computes on the CPU, so the " +
                             (what == "param" ? "parameters" : "optimizer state") + " already live in host memory; nothing moves");
  }
  // Every rank owns 1/dp of every bucket: under ZeRO the pieces it updates, and at every stage the
  // pieces it writes into a checkpoint.
  BucketShards shards = sharded_ ? sharded_->shards() : BucketShards(grad_sync_->buckets(), group->size(), group->rank());
  layout_ = StateLayout::data_parallel(*flat_, sharded_ ? sharded_->shard() : flat_->data(), shards, c_.zero_stage == 3,
                                       c_.zero_stage >= 1, !hybrid_mesh_ || hybrid_mesh_->coord("replicate") == 0);
  std::string zero_line;
  if (c_.zero_stage >= 1) {
    const std::string what = c_.zero_stage == 3 ? "parameters, gradients and optimizer state"
                             : c_.zero_stage == 2 ? "optimizer state and gradients" : "optimizer state";
    zero_line = "ZeRO stage " + std::to_string(c_.zero_stage) + ": " + what + " sharded over " + std::to_string(group->size()) +
                " rank(s)" + (hybrid_mesh_ ? " and replicated over " + std::to_string(hybrid_mesh_->size("replicate")) + " such groups (hybrid)" : "") +
                ", this rank owns " + std::to_string(shards.owned_numel()) + " of " + std::to_string(shards.numel()) +
                " parameters";
    if (sharded_)
      zero_line += "; " + std::to_string(grad_sync_->buckets().size()) + " units gathered one at a time with the next prefetched, " +
                   (c_.reshard_after_forward ? "blocks freed between forward and backward" : "kept whole from forward to backward") +
                   (!precision.enabled() ? ""
                    : c_.gather_16bit ? "; every unit with matmul weights gathered in " + precision_name(c_.precision)
                                      : "; matmul weights gathered in " + precision_name(c_.precision) + ", norms, biases and embeddings in fp32");
    auto inner = make_shard_optimizer(shards.shard_numel());
    std::unique_ptr<ParameterAllGather> gather;
    if (!sharded_) {  // stages 1 and 2: the updated pieces come back during the next forward pass
      gather = std::make_unique<ParameterAllGather>(shards, group, flat_->entries(), c_.model.n_layer);
      parameter_gather_ = gather.get();
      model_->set_part_hooks(parameter_gather_);
    }
    optimizer_ = std::make_unique<ZeroOptimizer>(std::move(inner), std::move(shards), c_.zero_stage, std::move(gather));
  } else {
    optimizer_ = make_flat_optimizer(c_.optimizer, flat_->data());
  }
  schedule_ = std::make_unique<LrSchedule>(c_.scheduler, optimizer_->base_lr(), c_.steps);
  guard_ = std::make_unique<StabilityGuard>(c_.stability);
  setup_lines_.push_back("model: " + c_.model.describe() + " on " + world_->device().str() + ", activation checkpointing " +
                         c_.activation_checkpointing.describe() + ", precision " + precision.describe());
  if (scaler_)
    setup_lines_.push_back(scaler_->dynamic() ? "fp16 loss scale: dynamic, from " + scale_text(scaler_->scale()) + " (window " +
                                                    std::to_string(c_.loss_scaler.window) + ", hysteresis " +
                                                    std::to_string(c_.loss_scaler.hysteresis) + ", minimum " +
                                                    scale_text(c_.loss_scaler.min_scale) + ")"
                                              : "fp16 loss scale: static " + scale_text(scaler_->scale()));
  setup_lines_.push_back("data parallel: " + std::to_string(c_.dp) + " rank(s); " + std::to_string(flat_->numel()) +
            " trainable parameters in " + std::to_string(grad_sync_->buckets().size()) + " gradient bucket(s)" +
            (frozen_.empty() ? "" : "; " + std::to_string(frozen_count) + " frozen parameters in " +
                                        std::to_string(frozen_.size()) + " tensors, not communicated"));
  if (!zero_line.empty()) setup_lines_.push_back(zero_line);
  // What stays in the memory the run computes in: an offloaded shard is in a file or in host memory.
  const bool shard_offloaded = sharded_ && (sharded_->shard_in_file() || sharded_->shard().device() != world_->device());
  const int64_t param_bytes = sharded_ ? (shard_offloaded ? 0 : sharded_->shard().nbytes()) : flat_->data().nbytes(),
                grad_bytes = grad_sync_->grads().nbytes(),
                optimizer_bytes = optimizer_->resident_bytes();
  setup_lines_.push_back("model states on this rank: parameters " + mib(param_bytes) + " MiB, gradients " + mib(grad_bytes) +
                         " MiB, optimizer " + mib(optimizer_bytes) + " MiB (" + mib(param_bytes + grad_bytes + optimizer_bytes) +
                         " MiB)");
  setup_lines_.push_back("batch: " + std::to_string(c_.global_batch) + " = micro " + std::to_string(c_.micro_batch) + " x accumulation " +
            std::to_string(c_.accumulation) + " x dp " + std::to_string(c_.dp) + " (" +
            std::to_string(c_.global_batch * c_.model.seq_len) + " tokens per step)");
}

// ZeRO-3's parameter shard in a file under nvme_path (parallel/zero/fully_sharded_parameters.h).
void Trainer::keep_shard_on_nvme() {
  const std::string key = "zero_optimization.offload_param";
  offload_to_nvme(key, [&] { sharded_->keep_shard_in_file(c_.offload_param.nvme_path); });
  setup_lines_.push_back(key + ".device=nvme: the parameter shard (" + mib(sharded_->shard().nbytes()) +
                         " MiB) in an unnamed file under " + printable(c_.offload_param.nvme_path) +
                         ", read piece by piece for each gather and " +
                         (c_.offload_optimizer.device == "nvme" ? "streamed through the optimizer's buffers with its state"
                                                                : "mapped for the optimizer step, its pages dropped after it"));
}

// The optimizer of this rank's `numel` shard elements: its state beside the parameters, or where
// offload_optimizer puts it. On an accelerator an offloaded state is updated by the CPU, where it is
// (parallel/zero/host_offload_optimizer.h).
std::unique_ptr<ElementwiseOptimizer> Trainer::make_shard_optimizer(int64_t numel) {
  const std::string& where = c_.offload_optimizer.device;
  const at::Device device = world_->device();
  const bool on_host = !device.is_cpu() && where != "none";
  const at::TensorOptions options = on_host ? flat_->options().device(at::kCPU) : flat_->options();
  std::unique_ptr<ElementwiseOptimizer> inner =
      where == "nvme" ? make_nvme_optimizer(numel, options) : make_flat_optimizer(c_.optimizer, at::empty({numel}, options));
  if (!on_host) return inner;
  const bool params_on_host = sharded_ && sharded_->shard().device() != device;
  auto offloaded = std::make_unique<HostOffloadOptimizer>(std::move(inner), numel, flat_->options(), device, params_on_host);
  setup_lines_.push_back("zero_optimization.offload_optimizer.device=" + where + ": the optimizer state is updated on the CPU where it lives, " +
                         "nothing of it on the " + device.str() + "; " + mib(offloaded->host_bytes()) + " MiB of host memory with the " +
                         (params_on_host ? "gradients'" : "gradients' and parameters'") + " staging buffers");
  return offloaded;
}

// The optimizer state of `numel` shard elements in files under nvme_path (parallel/zero/nvme_optimizer.h).
std::unique_ptr<ElementwiseOptimizer> Trainer::make_nvme_optimizer(int64_t numel, at::TensorOptions options) {
  const std::string key = "zero_optimization.offload_optimizer";
  std::unique_ptr<NvmeOptimizer> nvme;
  offload_to_nvme(key, [&] {
    nvme = std::make_unique<NvmeOptimizer>(make_elementwise_rule(c_.optimizer), numel, options,
                                           NvmeOffloadOptions{c_.offload_optimizer.nvme_path, c_.sub_group_size});
  });
  if (sharded_ && sharded_->shard_in_file()) nvme->stream_parameters_from(sharded_->shard_file(), sharded_->shard_file_name());
  const int64_t sub_group = std::min(c_.sub_group_size, numel);
  setup_lines_.push_back(key + ".device=nvme: optimizer state (" + mib(nvme->offloaded_bytes()) + " MiB) in unnamed files under " +
                         printable(c_.offload_optimizer.nvme_path) + ", streamed in " + std::to_string((numel + sub_group - 1) / sub_group) +
                         " sub-group(s) of " + std::to_string(sub_group) + " elements through " + mib(nvme->resident_bytes()) +
                         " MiB of buffers; I/O by " + nvme->io_mode());
  if (nvme->resident_bytes() >= nvme->streamed_bytes())
    setup_lines_.push_back("warning: zero_optimization.sub_group_size " + std::to_string(c_.sub_group_size) + " leaves the buffers as large as the " +
                           std::to_string(numel) + "-element state they stream, so offloading saves no memory; set it to " +
                           std::to_string(std::max<int64_t>(1, numel / 16)) + " or so");
  return nvme;
}

void Trainer::read_checkpoint(const std::string& dir) {
  optimizer_->finish_parameter_updates();  // no gather may write into what is loaded
  progress_ = load_training_state(dir, model_, *optimizer_, layout_);
  if (sharded_) sharded_->evict_shard();
}

// The checkpoint's fp16 loss scaler continues where it was; a run in another precision has none to
// continue, and a checkpoint from one starts the scaler afresh.
void Trainer::restore_loss_scaler(const nlohmann::json& saved) {
  if (!scaler_) {
    if (!saved.is_null()) log_.info("the checkpoint's fp16 loss scale is not used: this run computes in " + model_->precision().describe());
    return;
  }
  if (saved.is_null()) {
    log_.info("the checkpoint holds no fp16 loss scale (it was saved in " + progress_.precision + "); the scale starts at " +
              scale_text(scaler_->scale()));
    return;
  }
  scaler_->load_state(saved);
}

// Rank 0 picks the checkpoint (verifying checksums, and loading it to prove it fits the model);
// the other ranks load what it picked. Returns "" to start from scratch.
std::string Trainer::choose_checkpoint() {
  const std::string& resume = start_plan_.resume;
  if (resume == "never") return "";
  const auto load = [this](const std::string& dir) { read_checkpoint(dir); };
  std::vector<std::string> warnings;
  std::optional<CheckpointInfo> found;
  if (resume == "auto") {
    found = checkpoints_->find_resumable(load, &warnings);
  } else {
    try {
      found = CheckpointManager::resolve(resume, load, &warnings);
    } catch (const std::invalid_argument& e) {
      throw resume_path_error(e.what());
    }
  }
  for (const auto& w : warnings) log_.warn(w);
  if (!found && !warnings.empty())
    throw std::runtime_error("no checkpoint in " + (resume == "auto" ? c_.checkpoint.dir : printable(resume)) +
                             " can be resumed (warnings above say why); rather than start over beside them, dtrain stops: "
                             "move them away, or set train.resume=never with train.start_over=true to remove them");
  if (!found && resume != "auto") throw ConfigError("train.resume: '" + printable(resume) + "' holds no committed checkpoint");
  return found ? found->dir : "";
}

// Every rank says whether its part of `what` succeeded; all learn which did not (a collective).
std::vector<int> Trainer::ranks_that_failed(bool ok, const std::string& what) {
  const auto mine = at::tensor({ok ? 1L : 0L}, at::kLong).to(world_->device());
  const at::Tensor all = all_gather(*world_->world_group(), mine, what + " outcome").cpu();
  std::vector<int> failed;
  for (int r = 0; r < world_->size(); ++r)
    if (all[r].item<int64_t>() == 0) failed.push_back(r);
  return failed;
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
  const std::vector<int> failed = ranks_that_failed(!error, "checkpoint load");
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw std::runtime_error("rank " + std::to_string(failed.front()) + " could not load " + dir + " (its log says why), so this rank stops too");
  if (scaler_) scaler_ = std::make_unique<LossScaler>(c_.loss_scaler);  // a rollback forgets what came after
  restore_loss_scaler(progress_.loss_scaler);
  stream_->restore(progress_.data);
  if (metrics_) metrics_->forget_after(progress_.step);
}

// A run that continues a checkpoint of its own checkpoint.dir continues its lineage, which its saves
// may prune; any other start is a lineage of its own, which prunes nothing it did not write.
void Trainer::continue_lineage(const std::string& resumed_from) {
  const bool own = !resumed_from.empty() && resumes_within(resumed_from, c_.checkpoint.dir);
  checkpoints_->set_lineage(own ? CheckpointManager::read_manifest(resumed_from).lineage : CheckpointManager::new_lineage());
}

// The global batch is part of the training state: the data position counts whole batches and the
// loss curve depends on it. A resume at another data-parallel size keeps the checkpoint's by changing
// the accumulation, unless train_batch_size was given; every rank reaches the same answer.
void Trainer::keep_global_batch(const std::string& dir, const nlohmann::json& saved) {
  const int64_t batch = saved.value("train_batch_size", int64_t(0));
  if (batch <= 0 || batch == c_.global_batch) return;
  const std::string was = "the checkpoint " + dir + " was trained with a global batch of " + std::to_string(batch);
  if (c_.global_batch_given) {
    log_.warn(was + "; this run trains with " + std::to_string(c_.global_batch) + ", as train_batch_size says");
    return;
  }
  const int64_t per_accumulation = c_.micro_batch * c_.dp;
  if (batch % per_accumulation != 0) {
    std::string micro, ranks;
    for (int64_t m = 1; batch % c_.dp == 0 && m <= batch / c_.dp; ++m)
      if ((batch / c_.dp) % m == 0) micro += (micro.empty() ? "" : ", ") + std::to_string(m);
    for (int64_t r = 1; r <= std::min<int64_t>(batch, 1024); ++r)
      if (batch % r == 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw ConfigError(was + ", which " + std::to_string(c_.dp) + " data-parallel rank(s) with train_micro_batch_size_per_gpu " +
                      std::to_string(c_.micro_batch) + " cannot make (" + std::to_string(batch) + " is not a multiple of " +
                      std::to_string(per_accumulation) + "): " +
                      (micro.empty() ? "run on a number of data-parallel ranks that divides it (" + ranks + ")"
                                     : "set train_micro_batch_size_per_gpu to one of " + micro) +
                      ", or set train_batch_size=" + std::to_string(c_.global_batch) + " to go on with a global batch of " +
                      std::to_string(c_.global_batch));
  }
  const int64_t accumulation = batch / per_accumulation;
  log_.info(was + ": kept on " + std::to_string(c_.dp) + " data-parallel rank(s) as micro-batch " + std::to_string(c_.micro_batch) +
            " x accumulation " + std::to_string(accumulation) + " (the config alone gives " + std::to_string(c_.global_batch) + " = accumulation " +
            std::to_string(c_.accumulation) + "); set train_batch_size to change it");
  c_.global_batch = batch;
  c_.accumulation = accumulation;
  c_.json["train_batch_size"] = batch;
  c_.json["gradient_accumulation_steps"] = accumulation;
  c_.json["parallel"]["micro_batches"] = accumulation;
}

// The learning rate is a function of the step, so a resume with another schedule (train.steps, the
// scheduler, the base rate) jumps from one curve to another at the resume step: said once, with both rates.
void Trainer::warn_if_schedule_changed(const std::string& dir, const nlohmann::json& saved) {
  std::vector<std::string> changed;
  auto compare = [&](const nlohmann::json::json_pointer& key, const std::string& name) {
    if (saved.contains(key) && (!c_.json.contains(key) || saved.at(key) != c_.json.at(key)))
      changed.push_back(name + " " + saved.at(key).dump() + " -> " + (c_.json.contains(key) ? c_.json.at(key).dump() : "unset"));
  };
  compare(nlohmann::json::json_pointer("/train/steps"), "train.steps");
  compare(nlohmann::json::json_pointer("/scheduler"), "scheduler");
  // The optimizer's own rate, whether given or its type's default: `lr` may be set on one side only.
  std::optional<double> saved_lr;
  try {
    saved_lr = make_flat_optimizer(saved.at("optimizer"), at::zeros({1}))->base_lr();
  } catch (const std::exception&) {  // an optimizer this version cannot rebuild: the other keys say enough
  }
  if (saved_lr && *saved_lr != c_.base_lr)
    changed.push_back("optimizer learning rate " + scientific(*saved_lr) + " -> " + scientific(c_.base_lr));
  if (changed.empty()) return;
  std::string rates;
  try {
    const LrSchedule then(saved.at("scheduler"), saved_lr.value(), saved.at("train").at("steps").get<int64_t>());
    rates = ": at step " + std::to_string(progress_.step + 1) + " the learning rate is " + scientific(schedule_->lr(progress_.step) * progress_.lr_scale) +
            " where the run that saved it would have used " + scientific(then.lr(progress_.step) * progress_.lr_scale);
  } catch (const std::exception&) {  // a schedule this version cannot rebuild: the keys say enough
  }
  std::string list;
  for (const auto& c : changed) list += (list.empty() ? "" : "; ") + c;
  log_.warn("this run's learning-rate schedule differs from the one " + dir + " was trained with (" + list + ")" + rates);
}

// A resume in another shuffle order than the checkpoint's (data.shuffle_order changed, a corpus that
// crossed 2^23 samples under "auto", or a checkpoint from before the key, whose order was randperm)
// continues the epoch along another permutation: said once, as what it costs.
void Trainer::warn_if_order_changed(const std::string& dir, const nlohmann::json& saved) {
  using pointer = nlohmann::json::json_pointer;
  if (!c_.shuffle || !saved.value(pointer("/data/shuffle"), true) || progress_.data.samples == 0) return;
  const std::string then = saved.value(pointer("/data/shuffle_order"), std::string("randperm"));
  const std::string now = c_.json["data"]["shuffle_order"].get<std::string>();
  if (then == now) return;
  log_.warn(dir + " was trained in the " + then + " shuffle order and this run shuffles in the " + now +
            " order (data.shuffle_order): the rest of epoch " + std::to_string(progress_.data.epoch) +
            " follows another permutation, so until it ends some samples repeat and others are skipped; "
            "set data.shuffle_order=" + then + " to keep the checkpoint's order");
}

void Trainer::resume_or_start() {
  checkpoints_ = std::make_unique<CheckpointManager>(c_.checkpoint, world_->rank(),
                                                     [this](bool ok) { return ranks_that_failed(ok, "checkpoint"); });
  if (world_->rank() == 0) checkpoints_->remove_interrupted_saves();
  const std::string from = agree("trainer/resume", [this] { return choose_checkpoint(); });
  if (world_->rank() == 0) continue_lineage(from);
  if (!from.empty()) {
    load_checkpoint(from);
    const nlohmann::json saved = read_json_file(from + "/config.json");
    keep_global_batch(from, saved);
    warn_if_schedule_changed(from, saved);
    warn_if_order_changed(from, saved);
    log_.info("resumed from " + from + " at step " + std::to_string(progress_.step) +
              (progress_.lr_scale < 1 ? " (learning rate scaled by " + fixed(progress_.lr_scale, 4) + " after rollbacks)" : "") +
              (progress_.precision != precision_name(c_.precision)
                   ? "; it was saved by a " + progress_.precision + " run, and its fp32 weights continue in " + precision_name(c_.precision)
                   : ""));
  }
  // The run directory's config.json says what this start did: the checkpoint it resumed, or never.
  c_.json["train"]["resume"] = from.empty() ? "never" : from;
  if (world_->rank() == 0) write_file_atomically(c_.run_dir + "/config.json", c_.json.dump(2));
  // Every rank starts from rank 0's parameters (at stage 3 each loaded its own shard, and a fresh
  // start broadcast the units when they were built).
  std::vector<at::Tensor> parameters = frozen_;
  if (!sharded_) parameters.push_back(flat_->data());
  broadcast(*world_->world_group(), parameters, 0, "broadcast parameters");
}

std::optional<double> Trainer::evaluate() {
  const int64_t available = std::min<int64_t>(dataset_->size(Split::Validation), c_.eval_samples);
  if (available == 0) return std::nullopt;
  at::NoGradGuard no_grad;
  if (!sharded_) {
    optimizer_->finish_parameter_updates();
    model_->refresh_working_copy();
  }
  double sum = 0;
  int64_t count = 0;
  std::vector<int64_t> mine;
  for (int64_t i = world_->rank(); i < available; i += c_.dp) mine.push_back(i);
  for (size_t from = 0; from < mine.size(); from += size_t(c_.micro_batch)) {
    std::vector<int64_t> chunk(mine.begin() + from, mine.begin() + std::min(mine.size(), from + size_t(c_.micro_batch)));
    auto [x, y] = dataset_->batch(Split::Validation, chunk);
    sum += model_->loss(x.to(world_->device()), y.to(world_->device())).item<double>() * double(chunk.size());
    count += int64_t(chunk.size());
  }
  auto totals = at::tensor({sum, double(count)}, at::kDouble).to(world_->device());
  all_reduce(*world_->world_group(), totals, ReduceOp::Sum, "eval");
  return totals[0].item<double>() / totals[1].item<double>();
}

void Trainer::train_step(int64_t step) {
  const auto t0 = Clock::now();
  if (sharded_ && c_.wall_clock_breakdown) sharded_->start_trace();
  if (!sharded_) {  // stage 3 rounds each unit as it gathers it
    if (model_->precision().enabled()) optimizer_->finish_parameter_updates();  // the working copies read every weight
    model_->refresh_working_copy();
  }
  grad_sync_->zero_grad();
  StepOutcome out;
  const bool inject = scaler_ && overflow_injected(step + 1);
  out.loss_scale = scaler_ ? scaler_->scale() : 0;
  double loss_sum = 0;
  const auto device = world_->device();
  for (int64_t k = 0; k < c_.accumulation; ++k) {
    const bool sync = k + 1 == c_.accumulation || grad_sync_->reduces_every_micro_batch();
    grad_sync_->set_sync(sync, k + 1 == c_.accumulation);
    if (sync) grad_sync_->begin_backward();
    auto [x, y] = stream_->next();
    auto loss = model_->loss(x.to(device), y.to(device));
    if (scaler_) {
      (loss * ((inject ? INFINITY : out.loss_scale) / double(c_.accumulation))).backward();
    } else {
      (loss / double(c_.accumulation)).backward();
    }
    // 16-bit accumulation rounds the running sum after every micro-batch; the all-reduce rounds the last.
    if (c_.grad_accum_16bit && !sync) flat_->grad().copy_(flat_->grad().to(c_.precision));
    if (sync) {
      grad_sync_->finish_gradient_sync();
      out.comm_s += grad_sync_->last_overlap().comm_s;
      out.hidden_s += grad_sync_->last_overlap().hidden_s;
    }
    loss_sum += loss.item<double>();
  }
  // This rank's reduced gradients: the whole of them, or its ZeRO-2 shard. Clipping, the guard and
  // the norm in the metrics all see the true gradients, the norm summed over the shards.
  at::Tensor& grads = grad_sync_->grads();
  if (scaler_) grads.div_(out.loss_scale);
  auto loss_t = at::tensor({loss_sum / double(c_.accumulation)}, at::kDouble).to(device);
  all_reduce(*world_->world_group(), loss_t, ReduceOp::Avg, "loss");
  out.loss = loss_t.item<double>();
  out.grad_norm = global_grad_norm(grads, grad_sync_->shard_group());
  // The norm is the same on every rank, so an overflow on any rank is one on every rank: all skip together.
  out.overflow = scaler_ && !std::isfinite(out.grad_norm);
  if (scaler_) scaler_->update(out.overflow);
  if (!out.overflow) out.verdict = guard_->check(out.loss, out.grad_norm, &out.reason);
  out.lr = schedule_->lr(step) * progress_.lr_scale;
  if (!out.reason.empty()) last_unhealthy_reason_ = "step " + std::to_string(step + 1) + ": " + out.reason;
  if (out.verdict == StepVerdict::Apply && !out.overflow) {
    clip_grads(grads, out.grad_norm, c_.gradient_clipping);
    if (sharded_) optimizer_->step(sharded_->shard(), grads, sharded_->shard_decay(), out.lr);
    else optimizer_->step(flat_->data(), grads, flat_->decay_spans(), out.lr);
  } else {
    ++progress_.skipped_steps;
  }
  progress_.step = step + 1;
  progress_.data = stream_->position();
  progress_.tokens_seen += double(c_.global_batch * c_.model.seq_len);
  out.step_s = seconds_since(t0);
  report_step(step, out);
}

void Trainer::report_step(int64_t step, const StepOutcome& out) {
  const auto& overlap = grad_sync_->last_overlap();
  comm_s_ += out.comm_s;
  hidden_s_ += out.hidden_s;
  if (step > 0 || c_.steps == 1) {  // the first step warms caches and allocators
    step_seconds_sum_ += out.step_s;
    ++steps_timed_;
  }
  if (!out.reason.empty()) log_.warn("step " + std::to_string(step + 1) + ": " + out.reason);
  if (out.overflow)
    log_.info("step " + std::to_string(step + 1) + ": fp16 gradients overflowed at loss scale " + scale_text(out.loss_scale) +
              "; step skipped, loss scale now " + scale_text(scaler_->scale()));
  const double tokens_per_s = double(c_.global_batch * c_.model.seq_len) / out.step_s;
  const double achieved = c_.model.train_flops_per_token() * tokens_per_s;
  if (peak_flops_ > 0 && achieved > peak_flops_ && steps_timed_ > 0) {
    // The model outran the measured peak, so the measurement was low (the machine was busy then):
    // MFU above 100% would be a wrong number, not a fast run.
    log_.warn("the model reached " + fixed(achieved / 1e9, 1) + " GFLOP/s, above the matmul peak of " + fixed(peak_flops_ / 1e9, 1) +
              " GFLOP/s measured at start (the machine was busy then?); MFU is now against " + fixed(achieved / 1e9, 1) +
              " GFLOP/s; set train.peak_flops for a fixed bound");
    peak_flops_ = achieved;
  }
  const double mfu = peak_flops_ > 0 ? achieved / peak_flops_ : 0;
  if (metrics_) {
    nlohmann::json m = {{"step", step + 1}, {"loss", out.loss},     {"lr", out.lr},     {"grad_norm", out.grad_norm},
                        {"tokens_per_s", tokens_per_s}, {"step_s", out.step_s}, {"flops", achieved}, {"mfu", mfu}};
    if (out.overflow) m["skipped"] = "overflow";
    else if (out.verdict != StepVerdict::Apply) m["skipped"] = out.verdict == StepVerdict::SkipNonFinite ? "non_finite" : "spike";
    if (scaler_) m["loss_scale"] = out.loss_scale;
    if (c_.dp > 1) {
      m["comm_ms"] = out.comm_s * 1e3;
      m["comm_hidden_ms"] = out.hidden_s * 1e3;
    }
    if (c_.wall_clock_breakdown) {
      m["first_bucket_launch_ms"] = overlap.first_launch_s * 1e3;
      m["last_grad_ms"] = overlap.last_grad_s * 1e3;
      m["backward_end_ms"] = overlap.backward_end_s * 1e3;
      m["grad_sync_wait_ms"] = overlap.wait_s * 1e3;
      if (sharded_) {
        m["unit_trace"] = nlohmann::json::array();
        for (const auto& e : sharded_->trace()) m["unit_trace"].push_back({e.what, e.index, e.ms});
        m["unit_gather_bytes"] = sharded_->gathered_bytes();
      }
      if (parameter_gather_) m["gather_waited_before_part"] = parameter_gather_->waited_before_part();
    }
    metrics_->write(m);
  }
  const int64_t done = step + 1;
  if (done % c_.steps_per_print != 0 && done != c_.steps && step != 0) return;
  const double avg = steps_timed_ ? step_seconds_sum_ / double(steps_timed_) : out.step_s;
  std::string line = "step " + std::to_string(done) + "/" + std::to_string(c_.steps) + " | loss " + fixed(out.loss, 4) +
                     " | lr " + scientific(out.lr) + " | grad norm " + fixed(out.grad_norm, 3) + " | " + rate(tokens_per_s) +
                     " tok/s | " + fixed(achieved / 1e9, 1) + " GFLOP/s | MFU " + fixed(100 * mfu, 1) + "%";
  if (scaler_) line += " | loss scale " + scale_text(scaler_->scale());
  if (c_.dp > 1 && comm_s_ > 0) line += " | comm hidden " + fixed(100 * hidden_s_ / comm_s_, 0) + "%";
  line += " | ETA " + format_duration(avg * double(c_.steps - done));
  log_.info(line);
}

void Trainer::save(int64_t step) {
  const auto t0 = Clock::now();
  // every_hours must trigger on every rank at once: rank 0's clock decides.
  const CheckpointHealth health{guard_->last_step_healthy(), guard_->last_step_healthy() ? "" : last_unhealthy_reason_};
  check_replicas_agree(step);
  progress_.precision = precision_name(c_.precision);
  progress_.loss_scaler = scaler_ ? scaler_->state() : nlohmann::json();
  const std::string dir = checkpoints_->save(
      step, seconds_since(start_) / 3600.0, health,
      [&](const std::string& tmp) {
        if (save_failure_injected(step)) throw std::runtime_error("cannot write " + tmp + ": no space left on device (injected)");
        save_training_state(tmp, world_->rank(), model_, *optimizer_, layout_, progress_, c_.json);
      },
      [&](const std::string& tmp) { write_training_index(tmp, model_, *optimizer_, layout_); });
  log_.info("checkpoint: " + dir + " (" + fixed(seconds_since(t0), 2) + " s)" + (health.healthy ? "" : ", marked unhealthy"));
}

// Each rank writes its share of what is replicated, so every copy must be the same: the parameters
// at stages 0-2 and the frozen ones on every rank, and at stage 3 each shard across the replica
// groups of hybrid sharding (compared where it lies: no rank gathers the model). A copy that differs
// — a bug, or a silent fault on its machine — stops the run before anything is written, on every
// rank alike.
void Trainer::check_replicas_agree(int64_t step) {
  optimizer_->finish_parameter_updates();
  std::vector<at::Tensor> replicated = frozen_;
  if (!sharded_) replicated.push_back(flat_->data());
  if (replica_drift_injected(step)) {
    at::NoGradGuard no_grad;
    at::Tensor first = (sharded_ ? sharded_->shard() : flat_->data()).narrow(0, 0, 1);
    first.copy_(at::nextafter(first, at::full_like(first, INFINITY)));
  }
  const auto mine = at::tensor({parameter_fingerprint(replicated), sharded_ ? parameter_fingerprint({sharded_->shard()}) : int64_t(0)},
                               at::kLong)
                        .to(world_->device());
  const at::Tensor all = all_gather(*world_->world_group(), mine, "parameter fingerprint").cpu();
  const int shard_size = hybrid_mesh_ ? hybrid_mesh_->size("shard") : world_->size();
  auto differ = [&](const std::string& what, int rank, int holder, int index) {
    const int64_t got = all[2 * rank + index].item<int64_t>(), expected = all[2 * holder + index].item<int64_t>();
    if (got == expected) return;
    throw std::runtime_error("after step " + std::to_string(step) + " " + what + " of rank " + std::to_string(rank) +
                             (index == 0 ? " differ from rank " : " differs from rank ") + std::to_string(holder) + "'s (fingerprints " +
                             std::to_string(got) + " and " + std::to_string(expected) + "): the replicas have diverged, a bug or a fault on rank " +
                             std::to_string(rank) + "'s machine; no checkpoint is written");
  };
  for (int r = 1; r < world_->size(); ++r) {
    differ(sharded_ ? "the frozen parameters" : "the parameters", r, 0, 0);
    // Mesh ranks run shard-fastest: rank r % shard_size holds rank r's shard in the first group.
    if (sharded_) differ("the parameter shard", r, r % shard_size, 1);
  }
}

// Every rank reaches the same answer: the replicated parameters are the same on every rank, and
// shards are agreed on.
bool Trainer::parameters_finite() {
  optimizer_->finish_parameter_updates();
  if (!sharded_) return flat_->data().isfinite().all().item<bool>();
  auto finite = at::scalar_tensor(sharded_->shard().isfinite().all().item<bool>() ? 1.0 : 0.0, at::kDouble).reshape({1}).to(world_->device());
  all_reduce(*world_->world_group(), finite, ReduceOp::Min, "parameters finite");
  return finite.item<double>() == 1.0;
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
  const auto good = rollback_left ? std::nullopt : last_good_checkpoint("divergence");
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

// The checkpoint to advise after training went wrong: the newest healthy one that passes every check
// resume makes (checksums, finite tensors), never merely the newest whose manifest says healthy, which
// may hold poisoned weights. Rank 0 verifies, logging what it passes over; the others learn its answer.
std::optional<CheckpointInfo> Trainer::last_good_checkpoint(const std::string& why) {
  const std::string dir = agree("trainer/last_good/" + why, [this] {
    std::vector<std::string> warnings;
    const auto good = checkpoints_->find_resumable(nullptr, &warnings, /*healthy_only=*/true);
    for (const auto& w : warnings) log_.warn(w);
    return good ? good->dir : std::string();
  });
  if (dir.empty()) return std::nullopt;
  return CheckpointManager::read_manifest(dir);
}

int Trainer::run() {
  try {
    return train();
  } catch (const c10::Error& e) {
    log_.fatal(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    log_.fatal(e.what());
    throw;
  }
}

int Trainer::train() {
  // ATen, MKL and oneDNN share LibTorch's one OpenMP pool (MKL uses its GNU OpenMP layer): this
  // sizes all three, so nothing oversubscribes the cores.
  at::set_num_threads(threads());
  setup_lines_.push_back(keep_freed_host_memory());
  if (c_.deterministic) {
    // cuBLAS is deterministic only with a fixed workspace, read when its first handle is made;
    // without it ATen refuses every CUDA matmul under deterministic algorithms. An explicit setting wins.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
    at::globalContext().setDeterministicAlgorithms(true, false);
  }
  // Inputs are checked before the run directory exists, so a bad start leaves nothing on disk.
  build_data();
  build_model();
  setup_run_dir();
  log_.info("dtrain train: rank " + std::to_string(world_->rank()) + " of " + std::to_string(world_->size()) + ", backend " +
            world_->world_group()->backend_name() + ", " + std::to_string(at::get_num_threads()) + " thread(s) per rank, run dir " + c_.run_dir);
  for (const auto& line : setup_lines_) log_.info(line);
  if (world_->rank() == 0)
    for (const auto& warning : c_.warnings) log_.warn(warning);
  resume_or_start();

  peak_flops_ = c_.peak_flops > 0 ? c_.peak_flops * c_.world_size : 0;
  if (peak_flops_ == 0) {
    const auto& m = c_.model;
    const int64_t tokens = c_.micro_batch * m.seq_len;
    // A 16-bit run's GEMMs run natively or on widened operands (model/mixed_precision.h): its peak
    // is the faster of the two, so a slow native kernel cannot flatter MFU.
    double rank_peak = measure_matmul_flops(world_->device(), tokens, m.d_model, m.ff_dim());
    if (c_.precision != at::kFloat)
      rank_peak = std::max(rank_peak, measure_matmul_flops(world_->device(), tokens, m.d_model, m.ff_dim(), 0.9, c_.precision));
    auto peak = at::tensor({rank_peak}, at::kDouble).to(world_->device());
    all_reduce(*world_->world_group(), peak, ReduceOp::Sum, "matmul_peak");
    peak_flops_ = peak.item<double>();
  }
  if (progress_.step >= c_.steps) {
    log_.info("nothing to do: the checkpoint is at step " + std::to_string(progress_.step) + " of train.steps " + std::to_string(c_.steps));
    return 0;
  }
  log_.info("training steps " + std::to_string(progress_.step + 1) + ".." + std::to_string(c_.steps) +
            " (matmul peak " + fixed(peak_flops_ / 1e9, 1) + " GFLOP/s over all ranks" +
            (c_.precision != at::kFloat ? ", the better of " + precision_name(c_.precision) + " and fp32 GEMMs" : "") + ")");
  const int64_t released = release_freed_host_memory();
  if (released >= (1 << 20)) log_.info("host memory: " + mib(released) + " MiB that setting up freed given back to the kernel");
  start_ = Clock::now();
  const auto first = progress_.step;
  while (progress_.step < c_.steps) {
    const int64_t step = progress_.step;
    train_step(step);
    crash_point("step", step + 1);
    const bool last = step + 1 == c_.steps;
    if (c_.eval_every > 0 && ((step + 1) % c_.eval_every == 0 || last)) {
      if (const auto val = evaluate()) {
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
    else if (save_due && !parameters_finite())
      diverged = "the parameters are no longer finite";
    if (!diverged.empty()) {
      if (recover_from_divergence(step + 1, diverged)) continue;
      return kDivergedExitCode;
    }
    if (save_due) save(step + 1);
    // The step, the finiteness check and the save read the whole shard; on NVMe it leaves memory now.
    if (sharded_) sharded_->evict_shard();
    if (stop) {
      log_.info("stopping after step " + std::to_string(step + 1) + " as train.stop_at_step asks; resume continues from here");
      return 0;
    }
  }
  optimizer_->finish_parameter_updates();
  if (!guard_->last_step_healthy()) {
    const auto good = last_good_checkpoint("end");
    log_.warn("the run ended on an unhealthy step (" + last_unhealthy_reason_ + "); " +
              (good ? "the last healthy checkpoint is " + good->dir : std::string("no checkpoint is healthy and undamaged")));
  }
  const double elapsed = seconds_since(start_);
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  std::string summary = "done: " + std::to_string(c_.steps - first) + " steps in " + format_duration(elapsed) + ", " +
                        rate(double((c_.steps - first) * c_.global_batch * c_.model.seq_len) / elapsed) + " tok/s";
  if (c_.dp > 1 && comm_s_ > 0)
    summary += ", gradient reduction " + fixed(comm_s_, 2) + " s of which " + fixed(100 * hidden_s_ / comm_s_, 0) + "% hidden behind backward";
  if (scaler_ && scaler_->skipped_steps())
    summary += ", " + std::to_string(scaler_->skipped_steps()) + " fp16 overflow step(s) skipped (loss scale now " +
               scale_text(scaler_->scale()) + ")";
  if (guard_->skipped_non_finite() || guard_->spikes())
    summary += ", " + std::to_string(guard_->skipped_non_finite()) + " non-finite step(s) skipped, " +
               std::to_string(guard_->spikes()) + " spike(s)";
  if (progress_.rollbacks) summary += ", " + std::to_string(progress_.rollbacks) + " rollback(s)";
  summary += ", peak RSS " + std::to_string(usage.ru_maxrss / 1024) + " MiB, " + std::to_string(usage.ru_minflt) +
             " page faults (rank " + std::to_string(world_->rank()) + ")";
  log_.info(summary);
  return 0;
}

}  // namespace

int run_trainer(const TrainConfig& config, std::shared_ptr<World> world) {
  Trainer trainer(config, std::move(world));
  return trainer.run();
}

}  // namespace dtrain

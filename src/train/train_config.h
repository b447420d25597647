// The training config (docs/config.md): a JSON file, overridden by `--set dotted.key=value`,
// merged over config_defaults(), checked key by key, with "auto" values and batch arithmetic
// resolved for a given world size. Everything downstream reads typed fields from here.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/crash_points.h"
#include "data/shuffle_order.h"
#include "model/activation_checkpoint.h"
#include "model/transformer_config.h"
#include "optim/loss_scaler.h"
#include "parallel/parallel_dims.h"
#include "parallel/context/context_options.h"
#include "parallel/pipeline/pipeline_options.h"
#include "train/module_plan.h"
#include "train/stability_guard.h"

namespace dtrain {

// A config error: the message names the key (and the file or --set it came from).
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TrainConfig {
  nlohmann::json json;  // the merged, resolved config (what the run directory's config.json holds)
  std::string origin;   // where it came from, for messages: the file, or "demo config"
  std::string config_path;  // the config file read (empty: the demo config); a run never writes over it
  // What runs but is questionable (a key given twice, a warm-up as long as the run, no checkpoint
  // ever saved, parameters a --set of the type dropped): said once before the first step, by rank
  // 0 of a run and by `config check`.
  std::vector<std::string> warnings;

  TransformerConfig model;
  // model.init_from: a Hugging Face GPT-2 or Llama directory whose weights a fresh start loads
  // (hf/hf_checkpoint_reader.h), and whose config.json gave `model` its shape.
  std::string init_from;
  // zero_optimization.stage3_gather_16bit_weights_on_model_save: every checkpoint is also exported
  // as a Hugging Face model (hf/hf_export.h) into its hf/ directory, in the run's precision.
  bool export_hf_on_save = false;
  std::string data_source;
  // data.tokenizer: a tokenizer.json or SentencePiece model the text sources are tokenized with, made
  // absolute (the checkpoints' config.json names it for generate and export); empty: bytes are tokens.
  std::string tokenizer;
  double val_fraction = 0.05;
  bool shuffle = true;
  // data.shuffle_order; nullopt is "auto", which the trainer resolves once it knows the training samples.
  std::optional<ShuffleOrder> shuffle_order;
  // data.max_image_tokens, data.max_image_pixels, data.skip_bad_samples: how a vision-language source
  // (data/vlm_dataset.h) sizes its images and treats a sample it cannot use; data.ocr_random_lines:
  // lines of random characters the built-in OCR set trains on beside its corpus lines.
  int64_t max_image_tokens = 256, max_image_pixels = 16777216, ocr_random_lines = 0;
  bool skip_bad_samples = false;

  int world_size = 1, dp = 1;  // dp: parallel.dp()
  // The mesh's dims for world_size ranks (parallel/parallel_dims.h): dp_shard is every data-parallel
  // rank, or under hybrid sharding the ranks of one shard group, which dp_replicate replicates; tp
  // (parallel.tp) splits layers (parallel/tensor); pp (parallel.pp) cuts the blocks into pipeline
  // stages (parallel/pipeline); cp (parallel.cp) splits every sequence (parallel/context). Shard groups of a
  // node's ranks (shard_groups_per_node) are known once the run starts; until then dp_shard is every
  // data-parallel rank.
  ParallelDims parallel;
  bool sequence_parallel = false;  // parallel.sequence_parallel: norms and residuals on sequence shards over tp
  bool tp_overlap_grad_reduce = true;  // parallel.tp_overlap_grad_reduce: input-gradient reductions behind the weight-gradient GEMMs
  // parallel.pipeline.*: the schedule, virtual stages and split of the blocks into chunks (a split
  // of one chunk, all n_layer blocks, without pipeline parallelism).
  PipelineOptions pipeline;
  ContextParallelOptions context;  // parallel.context.impl: how attention spans the cp ranks' shards
  // accumulation: gradient_accumulation_steps, also named parallel.micro_batches; under pp the
  // micro-batches each step runs through the pipeline.
  int64_t global_batch = 0, micro_batch = 0, accumulation = 0;
  bool global_batch_given = false;  // train_batch_size was set, not derived: a resume at another dp keeps it
  // train_micro_batch_size_per_gpu and train_batch_size both "auto": the run takes the largest power
  // of two up to this cap that its memory holds (train/auto_micro_batch.h); micro_batch is the
  // default (8) until then. 0 when the batch keys fix the micro-batch.
  int64_t micro_batch_auto_cap = 0;
  static constexpr int64_t kAutoMicroBatchCap = 1024;  // docs/decisions.md, "A micro-batch that memory decides"
  double memory_budget = 0;  // train.memory_budget: bytes each rank may fill, for the choice above; 0: "auto"
  std::string batch_policy = "keep";  // elastic.batch_policy: keep | scale_lr | fail (train/batch_policy.h)

  int64_t steps = 0;
  int64_t stop_at_step = 0;  // stop early (with a checkpoint) after this step, as a time-limited job does
  uint64_t seed = 0;
  bool deterministic = false;
  bool trace = false;  // train.trace: trace.json in the run directory (train/run_trace.h)
  // train.profile_steps [first, last]: LibTorch's profiler over those steps (train/operator_profile.h); 0, 0: off
  int64_t profile_first = 0, profile_last = 0;
  std::string resume;  // auto | never | PATH, on a job's first start (a restart continues what the job wrote)
  bool start_over = false;  // train.start_over: remove what an earlier run left in the way instead of refusing
  std::vector<std::string> freeze;
  std::string run_dir;
  int threads = 0;
  ActivationCheckpointing activation_checkpointing;
  at::ScalarType precision = at::kFloat;  // kBFloat16 (bf16.enabled) or kHalf (fp16.enabled): mixed precision
  bool grad_accum_16bit = false;          // data_types.grad_accum_dtype names the 16-bit type
  LossScalerOptions loss_scaler;          // fp16's
  int64_t eval_every = 0, eval_samples = 0;
  StabilityOptions stability;
  std::string on_divergence;  // stop | rollback
  double rollback_lr_factor = 0.5;
  int max_rollbacks = 3;
  double peak_flops = 0;
  // train.inject_failure (train/failure_injection.h): where this job kills its own ranks, for tests.
  std::vector<CrashAt> inject_failure;

  double gradient_clipping = 0;
  int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;
  int64_t reduce_bucket_elements = 0;
  int zero_stage = 0;  // 1: optimizer state sharded over dp; 2: gradients too; 3: parameters too (parallel/zero)
  // parallel.modules (train/module_plan.h): what it freezes and keeps whole; zero_stage is its stage,
  // the one stage of every trainable parameter it does not keep whole.
  ModulePlan modules;
  // train.freeze's globs or parallel.modules freeze the parameter: it gets no gradient.
  bool freezes(const std::string& parameter_name) const;
  bool reshard_after_forward = true;  // stage 3: a block's parameters are freed between its forward and backward
  // Stage 3 under bf16/fp16 (parallel.fsdp.param_dtype): units holding matmul weights are gathered in
  // the 16-bit type, and every parameter of such a unit is used as rounded to it.
  bool gather_16bit = false;
  // Stage 3's hybrid sharding with shard groups of a node's ranks (shard_group_size "auto"), which
  // `parallel` gets once the run knows them (resolve_shard_group_per_node). A given size is in
  // `parallel` from the start.
  bool shard_groups_per_node = false;
  // Where ZeRO keeps the optimizer state and (stage 3) the parameters between uses: device "none",
  // "cpu" or "nvme" (in files under nvme_path, streamed sub_group_size elements at a time).
  struct Offload {
    std::string device = "none";
    std::string nvme_path;
  };
  Offload offload_optimizer, offload_param;
  // zero_optimization.sub_group_size; nullopt: "auto", sized from the offloaded state
  // (parallel/zero/nvme_optimizer.h, sub_group_size_for).
  std::optional<int64_t> sub_group_size;
  nlohmann::json optimizer, scheduler;
  double base_lr = 0;  // the optimizer's learning rate, which schedules scale

  // checkpoint.dir, or <run_dir>/ckpt when it is empty.
  std::string checkpoint_dir() const { return checkpoint.dir.empty() ? run_dir + "/ckpt" : checkpoint.dir; }

  CheckpointOptions checkpoint;
  std::string backend;
  double timeout_s = 300;
};

// The config the demo runs: `dtrain run` with no --config, and `make demo`.
const nlohmann::json& demo_config();

// "runs/<date-time>.<ms>-<pid>": the run directory when train.run_dir is empty.
std::string default_run_dir();

// Reads a config file (`path` empty: the demo config). Throws ConfigError naming the file. A key
// given twice in one object keeps its last value, as JSON parsers do, and adds a line to `warnings`.
nlohmann::json read_config_file(const std::string& path, std::vector<std::string>* warnings = nullptr);
// Applies "dotted.key=value" overrides; values parse as JSON, else as strings. A --set of
// optimizer.type or scheduler.type drops the params the new type does not take. Returns the
// warnings: what it dropped, keys given twice in a value.
std::vector<std::string> apply_overrides(nlohmann::json& config, const std::vector<std::string>& sets);
// Merges over the defaults, rejects unknown and unimplemented keys, resolves "auto" and batch
// arithmetic for `world_size` ranks. `origin` names where the config came from, for messages.
TrainConfig resolve_config(const nlohmann::json& user, int world_size, const std::string& origin);
// Hybrid sharding with shard groups of a node's ranks (shard_group_size "auto"), once the run knows
// `node_ranks`, the ranks of its node: sets the mesh's dp_replicate x dp_shard and the resolved JSON.
// Throws ConfigError when they do not divide dp. Any other config is left as it is.
void resolve_shard_group_per_node(TrainConfig& c, int node_ranks);
// All three for the commands: the file at `path` (empty: the demo config) with `sets` applied,
// resolved for `world_size` ranks.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& sets, int world_size);

}  // namespace dtrain

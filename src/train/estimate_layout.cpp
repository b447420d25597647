#include "train/estimate_layout.h"

#include <algorithm>

#include "common/printable_json.h"
#include "model/mixed_precision.h"
#include "model/parameter_shapes.h"
#include "train/config_schema.h"
#include "train/rank_memory.h"

namespace dtrain {

namespace {

nlohmann::json value_at(const nlohmann::json& config, const std::string& dotted) {
  std::string pointer = "/" + dotted;
  for (char& ch : pointer)
    if (ch == '.') ch = '/';
  const nlohmann::json::json_pointer at(pointer);
  return config.contains(at) ? config.at(at) : nlohmann::json();
}

}  // namespace

const std::vector<std::string>& layout_sections() {
  static const std::vector<std::string> sections = {
      "model", "parallel", "zero_optimization", "activation_checkpointing", "bf16", "fp16", "data_types", "train_batch_size",
      "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "optimizer", "train.activation_checkpointing", "train.freeze"};
  return sections;
}

const std::vector<LayoutKey>& layout_keys() {
  using U = KeyUse;
  static const std::vector<LayoutKey> keys = {
      // The model's shape: every formula reads it. The norm's epsilon and RoPE's base change no size.
      {"model", U::Modelled}, {"model.preset", U::Modelled}, {"model.arch", U::Modelled}, {"model.n_layer", U::Modelled},
      {"model.n_head", U::Modelled}, {"model.n_kv_head", U::Modelled}, {"model.d_model", U::Modelled}, {"model.d_ff", U::Modelled},
      {"model.seq_len", U::Modelled}, {"model.vocab_size", U::Modelled}, {"model.tie_embeddings", U::Modelled},
      {"model.norm_eps", U::NoEffect}, {"model.rope_theta", U::NoEffect}, {"model.init_from", U::Modelled},
      // The vision side of arch "vlm": its shape, and the largest image grid (tools/estimate/vision_memory.h).
      {"model.vision", U::Modelled}, {"model.vision.n_layer", U::Modelled}, {"model.vision.n_head", U::Modelled},
      {"model.vision.d_model", U::Modelled}, {"model.vision.d_ff", U::Modelled}, {"model.vision.patch_size", U::Modelled},
      {"model.vision.channels", U::Modelled}, {"model.vision.max_grid", U::Modelled}, {"model.vision.merge", U::Modelled},
      {"model.vision.image_token_id", U::NoEffect}, {"model.vision.end_token_id", U::NoEffect}, {"model.vision.token_order", U::NoEffect},
      // The mesh, the pipeline's schedule and split (the schedules without formulas are refused by
      // the estimate itself: uncovered_layout). Ring and Ulysses attention keep the same tensors
      // (measured), and the tensor-parallel overlap changes no size.
      {"parallel", U::Modelled}, {"parallel.dp", U::Modelled}, {"parallel.tp", U::Modelled}, {"parallel.pp", U::Modelled},
      {"parallel.cp", U::Modelled}, {"parallel.sequence_parallel", U::Modelled}, {"parallel.tp_overlap_grad_reduce", U::NoEffect},
      {"parallel.pipeline", U::Modelled}, {"parallel.pipeline.schedule", U::Modelled}, {"parallel.pipeline.virtual_stages", U::Modelled},
      {"parallel.pipeline.split", U::Modelled}, {"parallel.context", U::NoEffect}, {"parallel.context.impl", U::NoEffect},
      {"parallel.micro_batches", U::Modelled},
      // Per-module plans freeze and keep whole what they name (the estimate refuses the freezes it
      // does not model: uncovered_layout).
      {"parallel.modules", U::Modelled}, {"parallel.fsdp", U::Modelled}, {"parallel.fsdp.sharding_strategy", U::Modelled},
      {"parallel.fsdp.reshard_after_forward", U::Modelled}, {"parallel.fsdp.shard_group_size", U::Modelled},
      {"parallel.fsdp.param_dtype", U::Modelled},
      // ZeRO. DeepSpeed's tuning keys dtrain accepts and does not use change nothing (the offload
      // sections' buffers among them); the model save export happens outside the steps;
      // sub_group_size sizes NVMe offload's buffers; where nvme_path is changes no size.
      {"zero_optimization", U::Modelled}, {"zero_optimization.stage", U::Modelled}, {"zero_optimization.reduce_bucket_size", U::Modelled},
      {"zero_optimization.allgather_bucket_size", U::NoEffect}, {"zero_optimization.overlap_comm", U::NoEffect},
      {"zero_optimization.contiguous_gradients", U::NoEffect}, {"zero_optimization.reduce_scatter", U::NoEffect},
      {"zero_optimization.allgather_partitions", U::NoEffect}, {"zero_optimization.round_robin_gradients", U::NoEffect},
      {"zero_optimization.sub_group_size", U::Modelled},
      {"zero_optimization.stage3_prefetch_bucket_size", U::NoEffect}, {"zero_optimization.stage3_param_persistence_threshold", U::NoEffect},
      {"zero_optimization.stage3_max_live_parameters", U::NoEffect}, {"zero_optimization.stage3_max_reuse_distance", U::NoEffect},
      {"zero_optimization.stage3_gather_16bit_weights_on_model_save", U::NoEffect},
      {"zero_optimization.offload_optimizer", U::Modelled}, {"zero_optimization.offload_optimizer.device", U::Modelled},
      {"zero_optimization.offload_param", U::Modelled}, {"zero_optimization.offload_param.device", U::Modelled},
      {"zero_optimization.offload_optimizer.nvme_path", U::NoEffect}, {"zero_optimization.offload_optimizer.pin_memory", U::NoEffect},
      {"zero_optimization.offload_optimizer.buffer_count", U::NoEffect}, {"zero_optimization.offload_optimizer.buffer_size", U::NoEffect},
      {"zero_optimization.offload_optimizer.max_in_cpu", U::NoEffect}, {"zero_optimization.offload_optimizer.fast_init", U::NoEffect},
      {"zero_optimization.offload_optimizer.ratio", U::NoEffect}, {"zero_optimization.offload_param.nvme_path", U::NoEffect},
      {"zero_optimization.offload_param.pin_memory", U::NoEffect}, {"zero_optimization.offload_param.buffer_count", U::NoEffect},
      {"zero_optimization.offload_param.buffer_size", U::NoEffect}, {"zero_optimization.offload_param.max_in_cpu", U::NoEffect},
      {"zero_optimization.offload_param.fast_init", U::NoEffect}, {"zero_optimization.offload_param.ratio", U::NoEffect},
      // How checkpointed inputs are kept (model/activation_store.h): split over tp (modelled), in
      // host memory (nothing moves on the CPU build; refused on a GPU by the estimate itself:
      // uncovered_layout) or in one buffer of number_checkpoints slots allocated whole (modelled).
      {"activation_checkpointing", U::Modelled}, {"activation_checkpointing.partition_activations", U::Modelled},
      {"activation_checkpointing.cpu_checkpointing", U::Modelled}, {"activation_checkpointing.contiguous_memory_optimization", U::Modelled},
      {"activation_checkpointing.number_checkpoints", U::Modelled}, {"activation_checkpointing.synchronize_checkpoint_boundary", U::NoEffect},
      {"activation_checkpointing.profile", U::NoEffect},
      // Precision: the compute type's bytes. The loss scaler's settings change no size.
      {"bf16", U::Modelled}, {"bf16.enabled", U::Modelled}, {"fp16", U::Modelled}, {"fp16.enabled", U::Modelled},
      {"fp16.loss_scale", U::NoEffect}, {"fp16.initial_scale_power", U::NoEffect}, {"fp16.loss_scale_window", U::NoEffect},
      {"fp16.hysteresis", U::NoEffect}, {"fp16.consecutive_hysteresis", U::NoEffect}, {"fp16.min_loss_scale", U::NoEffect},
      {"fp16.auto_cast", U::NoEffect},
      // 16-bit gradient accumulation: DDP's and ZeRO-1's buckets sent as 16-bit copies (modelled);
      // ZeRO-2's and 3's send buffers in 16 bits, under the 4-byte terms.
      {"data_types", U::Modelled}, {"data_types.grad_accum_dtype", U::Modelled},
      // The batch: the micro-batch sizes the activations, the accumulation ZeRO-2's buffers.
      {"train_batch_size", U::Modelled}, {"train_micro_batch_size_per_gpu", U::Modelled}, {"gradient_accumulation_steps", U::Modelled},
      // The optimizer's state per parameter (its type and, for SGD, momentum).
      {"optimizer", U::Modelled}, {"optimizer.type", U::Modelled}, {"optimizer.params", U::Modelled},
      {"train.activation_checkpointing", U::Modelled},
      // Frozen parameters keep no gradient or optimizer state.
      {"train.freeze", U::Modelled}};
  return keys;
}

MemoryLayout estimate_layout(const TrainConfig& c, bool device_is_cpu, int ranks_per_node) {
  MemoryLayout l;
  l.model = c.model;
  l.dp = c.parallel.dp();
  l.dp_shard = c.parallel.dp_shard * c.parallel.cp;  // ZeRO shards over dp_shard_cp
  l.tp = c.parallel.tp;
  l.pp = c.parallel.pp;
  l.cp = c.parallel.cp;
  l.sequence_parallel = c.sequence_parallel;
  l.schedule = c.pipeline.schedule;
  l.virtual_stages = c.pipeline.virtual_stages;
  l.split = c.pipeline.split;
  l.ranks_per_node = ranks_per_node;
  l.zero_stage = c.zero_stage;
  l.reshard_after_forward = c.reshard_after_forward;
  l.gather_16bit = c.gather_16bit;
  l.reduce_bucket_elements = c.reduce_bucket_elements;
  l.grad_accum_16bit = c.grad_accum_16bit;
  l.offload_optimizer = c.offload_optimizer.device;
  l.offload_param = c.offload_param.device;
  l.sub_group_size = c.sub_group_size.value_or(0);
  l.micro_batch = c.micro_batch;
  l.accumulation = c.accumulation;
  l.activation_checkpointing = c.activation_checkpointing;
  l.compute_bytes = int(c10::elementSize(c.precision));
  l.native_gemm = MixedPrecision::make(c.precision, device_is_cpu ? at::Device(at::kCPU) : at::Device(at::kCUDA)).native_gemm;
  l.optimizer_bytes = optimizer_state_bytes(c.optimizer);
  l.optimizer_name = c.optimizer.value("type", std::string("AdamW"));
  l.device_is_cpu = device_is_cpu;
  if (c.model.is_vlm()) {
    // One image per sample, at most data.max_image_tokens tokens, (max_grid/merge)² by its grid and
    // the row's seq_len beside its text (data/patch_grid.h, data/vlm_sample.h): the largest the data allows.
    const VisionConfig& v = c.model.vision;
    const int64_t side = v.max_grid / v.merge;
    l.max_image_patches = std::min({c.max_image_tokens, side * side, int64_t(c.model.seq_len)}) * v.merge * v.merge;
  }
  for (const ParameterShape& s : parameter_shapes(c.model)) {
    if (c.freezes(s.name)) l.frozen.push_back(s.name);
    else if (c.modules.keeps_whole(s.name)) l.kept_whole.push_back(s.name);
  }
  const nlohmann::json& defaults = config_defaults();
  for (const LayoutKey& k : layout_keys()) {
    if (k.use != KeyUse::Refused) continue;
    const nlohmann::json value = value_at(c.json, k.key);
    const bool unset = value.is_null() || ((value.is_array() || value.is_object()) && value.empty());
    if (!unset && value != value_at(defaults, k.key)) l.unmodelled.push_back(k.key + "=" + printable_json(value));
  }
  return l;
}

}  // namespace dtrain

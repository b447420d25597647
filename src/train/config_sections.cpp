#include "train/config_sections.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include "common/printable.h"
#include "common/printable_json.h"
#include "common/range_words.h"
#include "model/mixed_precision.h"
#include "model/parameter_shapes.h"
#include "parallel/context/context_options.h"
#include "parallel/pipeline/schedule_kind.h"
#include "train/config_reader.h"
#include "train/config_schema.h"

namespace dtrain {

using json = nlohmann::json;

// Overlays `user` on `base`, rejecting keys the schema lacks.
void merge_checked(json& base, const json& user, const std::string& prefix, const std::string& origin) {
  if (!user.is_object())
    fail(origin, (prefix.empty() ? std::string("the config") : "'" + prefix + "'") + " must be a JSON object, got " + printable_json(user));
  for (auto it = user.begin(); it != user.end(); ++it) {
    const std::string path = join_key(prefix, it.key());
    if (!base.contains(it.key())) {
      const std::string near = nearest_known_key(path);
      fail(origin, "unknown key '" + printable(path) + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                       "; docs/config.md lists every key");
    }
    json& slot = base[it.key()];
    if (slot.is_object() && !is_free_form(path)) {
      merge_checked(slot, it.value(), path, origin);
    } else {
      if (is_free_form(path) && !it.value().is_object())
        fail(origin, "'" + path + "' must be a JSON object, got " + printable_json(it.value()));
      slot = it.value();
    }
  }
}

void drop_moved_keys(json& user, TrainConfig& c) {
  // parallel.pipeline_schedule was reserved, taking "1f1b" alone, before pipelines had a section.
  if (!user.contains("parallel") || !user["parallel"].is_object() || !user["parallel"].contains("pipeline_schedule")) return;
  const json value = user["parallel"]["pipeline_schedule"];
  if (value != "1f1b")
    fail(c.origin, "'parallel.pipeline_schedule' is now 'parallel.pipeline.schedule' (" + schedule_names() + "), got " +
                       printable_json(value) + "; rename the key");
  user["parallel"].erase("pipeline_schedule");
  c.warnings.push_back(c.origin + ": 'parallel.pipeline_schedule' is now 'parallel.pipeline.schedule'; its value \"1f1b\", the only one "
                                  "it took, is the new key's default, and the old key is ignored: remove it");
}

// DeepSpeed's tuning keys that dtrain accepts and does not use (docs/config.md says what it does
// instead): their values are checked all the same, so a mistake in one is named, not carried along.
void check_unused_deepspeed_keys(const Reader& r) {
  for (const char* key : {"overlap_comm", "contiguous_gradients", "reduce_scatter", "allgather_partitions", "round_robin_gradients"})
    r.boolean(std::string("zero_optimization.") + key);
  r.integer("zero_optimization.allgather_bucket_size", 1);
  r.integer("zero_optimization.stage3_max_live_parameters", 0);
  r.integer("zero_optimization.stage3_max_reuse_distance", 0);
  for (const char* key : {"synchronize_checkpoint_boundary", "profile"}) r.boolean(std::string("activation_checkpointing.") + key);
  for (const std::string section : {"zero_optimization.offload_optimizer", "zero_optimization.offload_param"}) {
    r.boolean(section + ".pin_memory");
    r.boolean(section + ".fast_init");
    r.integer(section + ".buffer_count", 1);
    r.integer(section + ".buffer_size", 1);
    r.integer(section + ".max_in_cpu", 0);
    r.number(section + ".ratio", 0, 1);
  }
}

// DeepSpeed's activation_checkpointing keys: how the inputs of the blocks train.activation_checkpointing
// recomputes whole are kept (model/activation_store.h). DeepSpeed's rules hold: the contiguous buffer
// needs partition_activations, and number_checkpoints slots, one per input checkpointed in a forward
// pass. dtrain knows that count, so a null number_checkpoints is the count, and a smaller one, which
// DeepSpeed would find out as an index error mid-step, is refused here.
void resolve_profile_steps(const Reader& r, TrainConfig& c) {
  const nlohmann::json& steps = r.at("train.profile_steps");
  if (steps.is_array() && steps.empty()) return;
  const auto step = [&](size_t i) { return steps[i].is_number_integer() ? steps[i].get<int64_t>() : int64_t(0); };
  if (!steps.is_array() || steps.size() != 2 || step(0) < 1 || step(1) < step(0) || step(1) > c.steps)
    fail(r.origin(), "'train.profile_steps' must be [] or [first, last], two steps with 1 <= first <= last <= train.steps (" +
                         std::to_string(c.steps) + "), got " + printable_json(steps));
  c.profile_first = step(0);
  c.profile_last = step(1);
}

void resolve_activation_store(const Reader& r, TrainConfig& c) {
  const std::string key = "activation_checkpointing.";
  ActivationStoreOptions& s = c.activation_checkpointing.store;
  s.partition = r.boolean(key + "partition_activations");
  s.host_memory = r.boolean(key + "cpu_checkpointing");
  s.contiguous = r.boolean(key + "contiguous_memory_optimization");
  const bool slots_given = !r.is_null(key + "number_checkpoints");
  const int given = slots_given ? r.small_integer(key + "number_checkpoints", 1) : 0;
  const int checkpointed = c.activation_checkpointing.whole_blocks(0, c.model.n_layer);
  const std::string mode = "train.activation_checkpointing " + c.activation_checkpointing.describe();
  if (s.contiguous && !s.partition)
    fail(r.origin(), "'activation_checkpointing.contiguous_memory_optimization' needs 'activation_checkpointing.partition_activations' "
                     "true, as in DeepSpeed: the buffer holds each rank's partitioned pieces");
  if (s.contiguous && slots_given && given < checkpointed)
    fail(r.origin(), "'activation_checkpointing.number_checkpoints' is " + std::to_string(given) + ", but " + mode + " checkpoints " +
                         std::to_string(checkpointed) + " block inputs in each forward pass of the " + std::to_string(c.model.n_layer) +
                         "-layer model, and contiguous_memory_optimization's buffer needs a slot for each: set it to at least " +
                         std::to_string(checkpointed) + ", or null to use that count");
  if (slots_given && !s.contiguous)
    c.warnings.push_back(r.origin() + ": 'activation_checkpointing.number_checkpoints' sizes the buffer of "
                                      "activation_checkpointing.contiguous_memory_optimization, which is off: it has no effect");
  if (s.any() && checkpointed == 0) {
    c.warnings.push_back(r.origin() + ": activation_checkpointing's partition_activations, cpu_checkpointing and "
                                      "contiguous_memory_optimization keep the inputs of blocks recomputed whole, and " + mode +
                                      " recomputes none: they have no effect (train.activation_checkpointing full or every:N would use them)");
    s = ActivationStoreOptions();
    return;
  }
  s.slots = slots_given ? given : checkpointed;
  if (s.contiguous) c.json["activation_checkpointing"]["number_checkpoints"] = s.slots;
}

// What ZeRO stage 3 does in DeepSpeed's terms, where the config says "auto": it gathers one unit
// ahead of its use (a unit is at most a forward part: a block, the embeddings, or the final norm
// and head), and keeps no parameter whole for being small. Below stage 3 nothing is gathered.
void resolve_stage3_keys(const Reader& r, TrainConfig& c) {
  json& z = c.json["zero_optimization"];
  if (!r.integer_or_auto("zero_optimization.stage3_prefetch_bucket_size", 0))
    z["stage3_prefetch_bucket_size"] = c.zero_stage == 3 ? c.model.largest_part_parameters() : 0;
  if (!r.integer_or_auto("zero_optimization.stage3_param_persistence_threshold", 0)) z["stage3_param_persistence_threshold"] = 0;
}

void resolve_parallel_dims(const Reader& r, TrainConfig& c) {
  ParallelDims dims;
  dims.pp = r.small_integer("parallel.pp", 1);
  dims.cp = r.small_integer("parallel.cp", 1);
  dims.tp = r.small_integer("parallel.tp", 1);
  c.sequence_parallel = r.boolean("parallel.sequence_parallel");
  const auto impl = context_impl(r.text("parallel.context.impl"));
  if (!impl) fail(r.origin(), "'parallel.context.impl' must be one of " + names_listed(kContextImplNames) + ", got " + printable_json(r.at("parallel.context.impl")));
  c.context.impl = *impl;
  c.tp_overlap_grad_reduce = r.boolean("parallel.tp_overlap_grad_reduce");
  if (const auto dp = r.integer_or_auto("parallel.dp", 1, INT_MAX)) dims.dp_shard = int(*dp);
  // Said of tp alone, before the product of every dim is: the world is cut into tp groups.
  if (c.world_size % dims.tp != 0)
    fail(r.origin(), "'parallel.tp' (" + std::to_string(dims.tp) + ") does not divide the world size (" + std::to_string(c.world_size) +
                         "): the ranks form tp groups of parallel.tp adjacent ranks each");
  try {
    c.parallel = dims.resolved(c.world_size);
  } catch (const std::invalid_argument& e) {
    fail(r.origin(), e.what());
  }
  c.dp = c.parallel.dp();
  c.json["parallel"]["dp"] = c.dp;
}

void split_into_shard_groups(TrainConfig& c, int size) {
  c.parallel.dp_replicate = c.dp / size;
  c.parallel.dp_shard = size;
  c.json["parallel"]["fsdp"]["shard_group_size"] = size;
}

// zero_optimization.stage and FSDP's words for the same thing: parallel.fsdp.sharding_strategy
// full_shard is stage 3, shard_grad_op stage 3 keeping parameters whole from forward to backward,
// no_shard plain data parallelism. Either may be given; both only when they agree.
void resolve_sharding(const Reader& r, TrainConfig& c) {
  c.zero_stage = int(r.integer("zero_optimization.stage", 0, 3));
  c.export_hf_on_save = r.boolean("zero_optimization.stage3_gather_16bit_weights_on_model_save");
  const bool strategy_set = !r.is_null("parallel.fsdp.sharding_strategy");
  const std::string strategy = strategy_set ? r.text("parallel.fsdp.sharding_strategy") : "";
  if (strategy_set) {
    int stage = 0;
    if (strategy == "full_shard" || strategy == "shard_grad_op" || strategy == "hybrid_shard") stage = 3;
    else if (strategy != "no_shard")
      fail(r.origin(), "'parallel.fsdp.sharding_strategy' must be \"full_shard\", \"shard_grad_op\", \"hybrid_shard\" or "
                       "\"no_shard\", got " + printable_json(r.at("parallel.fsdp.sharding_strategy")));
    if (c.zero_stage != 0 && c.zero_stage != stage)
      fail(r.origin(), "'parallel.fsdp.sharding_strategy' " + strategy + " shards as ZeRO stage " + std::to_string(stage) +
                       " does, but 'zero_optimization.stage' is " + std::to_string(c.zero_stage) + "; set one of them");
    c.zero_stage = stage;
  }
  // Before what applies to one stage only is checked: the modules may set the run's.
  c.modules = resolve_module_plan(r.at("parallel.modules"), parameter_names(c.model), c.zero_stage, c.freeze, r.origin());
  c.zero_stage = c.modules.zero_stage;
  c.reshard_after_forward = strategy != "shard_grad_op";
  // Without hybrid sharding every data-parallel rank is in the one group, which the resolved config
  // says; with it, "auto" is a node's ranks, which the trainer learns and writes.
  const std::optional<int64_t> group = r.integer_or_auto("parallel.fsdp.shard_group_size", 1, INT_MAX);
  if (strategy == "hybrid_shard") {
    c.shard_groups_per_node = !group;
    if (group && c.dp % *group != 0)
      fail(r.origin(), "'parallel.fsdp.shard_group_size' is " + std::to_string(*group) + ", which does not divide the " +
                           std::to_string(c.dp) + " data-parallel ranks");
    if (group) split_into_shard_groups(c, int(*group));
  } else {
    if (group && *group != c.dp)
      fail(r.origin(), "'parallel.fsdp.shard_group_size' is " + std::to_string(*group) + ", but it applies to parallel.fsdp.sharding_strategy "
                       "hybrid_shard, and this run does not use it: its one group is every data-parallel rank (" + std::to_string(c.dp) +
                       "); remove the key or set it to " + std::to_string(c.dp));
    c.json["parallel"]["fsdp"]["shard_group_size"] = c.dp;
  }
  if (!r.is_null("parallel.fsdp.reshard_after_forward")) {
    const bool reshard = r.boolean("parallel.fsdp.reshard_after_forward");
    if (c.zero_stage != 3)
      fail(r.origin(), "'parallel.fsdp.reshard_after_forward' applies to sharded parameters (zero_optimization.stage 3 or "
                       "parallel.fsdp.sharding_strategy full_shard), and this run does not shard them");
    if (strategy == "shard_grad_op" && reshard)
      fail(r.origin(), "'parallel.fsdp.reshard_after_forward' true contradicts sharding_strategy shard_grad_op, which keeps "
                       "parameters whole from forward to backward");
    c.reshard_after_forward = reshard;
  }
  const std::string param_dtype = r.text("parallel.fsdp.param_dtype");
  if (param_dtype != "fp32") {
    if (param_dtype != "bf16" && param_dtype != "fp16")
      fail(r.origin(), "'parallel.fsdp.param_dtype' must be \"fp32\", \"bf16\" or \"fp16\", got " + printable_json(r.at("parallel.fsdp.param_dtype")));
    if (param_dtype != precision_name(c.precision))
      fail(r.origin(), "'parallel.fsdp.param_dtype' " + param_dtype + " needs " + param_dtype + ".enabled: parameters are gathered in "
                       "the type the run computes in, and this run computes in " + precision_name(c.precision));
    if (c.zero_stage != 3)
      fail(r.origin(), "'parallel.fsdp.param_dtype' applies to sharded parameters (zero_optimization.stage 3), and this run does not "
                       "shard them");
    c.gather_16bit = true;
  }
}

// zero_optimization.offload_optimizer or offload_param: {"device": "none" | "cpu" | "nvme", ...}.
// DeepSpeed's rules: the optimizer offloads from stage 1, parameters at stage 3.
TrainConfig::Offload resolve_offload(const Reader& r, const std::string& key, int min_stage, int stage) {
  TrainConfig::Offload offload;
  offload.device = r.text(key + ".device");
  const std::string& device = offload.device;
  if (device != "none" && device != "cpu" && device != "nvme")
    fail(r.origin(), "'" + key + ".device' must be \"none\", \"cpu\" or \"nvme\", got " + printable_json(r.at(key + ".device")));
  if (!r.is_null(key + ".nvme_path")) offload.nvme_path = r.text(key + ".nvme_path");
  if (device == "none") return offload;
  if (stage < min_stage)
    fail(r.origin(), "'" + key + ".device' " + device + " needs zero_optimization.stage " + std::to_string(min_stage) +
                         (min_stage < 3 ? " or above" : "") + ", and this run has stage " + std::to_string(stage));
  if (device == "nvme" && offload.nvme_path.empty())
    fail(r.origin(), "'" + key + ".device' nvme needs '" + key + ".nvme_path', a directory on the fast disk");
  return offload;
}

// bf16.*, fp16.* and data_types.grad_accum_dtype.
void resolve_precision(const Reader& r, TrainConfig& c) {
  const bool fp16 = r.boolean("fp16.enabled"), bf16 = r.boolean("bf16.enabled");
  if (fp16 && bf16)
    fail(r.origin(), "'fp16.enabled' and 'bf16.enabled' are both true; a run computes in one 16-bit format, so enable at most one");
  c.precision = fp16 ? at::kHalf : bf16 ? at::kBFloat16 : at::kFloat;
  if (r.boolean("fp16.auto_cast"))
    fail(r.origin(), "'fp16.auto_cast' casts a model's floating-point inputs to fp16, and dtrain's model takes token ids; "
                     "remove it (fp16.enabled alone runs the model in fp16)");
  auto& s = c.loss_scaler;
  s.static_scale = r.number("fp16.loss_scale", 0);
  s.initial_scale_power = r.small_integer("fp16.initial_scale_power", 0, 120);
  s.window = r.integer("fp16.loss_scale_window", 1);
  s.hysteresis = r.small_integer("fp16.hysteresis", 1);
  s.consecutive_hysteresis = r.boolean("fp16.consecutive_hysteresis");
  s.min_scale = r.number("fp16.min_loss_scale", 0);
  if (s.min_scale == 0) fail(r.origin(), "'fp16.min_loss_scale' must be above 0");
  if (r.is_null("data_types.grad_accum_dtype")) return;
  const std::string accum = r.text("data_types.grad_accum_dtype");
  const std::string compute = fp16 ? "fp16" : bf16 ? "bf16" : "fp32";
  if (accum != "fp32" && accum != "bf16" && accum != "fp16")
    fail(r.origin(), "'data_types.grad_accum_dtype' must be \"fp32\", \"bf16\" or \"fp16\", got " + printable_json(r.at("data_types.grad_accum_dtype")));
  if (accum != "fp32" && accum != compute)
    fail(r.origin(), "'data_types.grad_accum_dtype' is \"" + accum + "\" but the run computes in " + compute +
                         "; gradients accumulate in fp32 or in the run's own 16-bit type (set " + accum + ".enabled=true, or remove the key)");
  c.grad_accum_16bit = accum != "fp32";
}

// gradient_accumulation_steps, or parallel.micro_batches, its other name (a pipeline's micro-batches
// per step): nullopt when both are "auto".
std::optional<int64_t> accumulation_steps(const Reader& r) {
  const std::optional<int64_t> steps = r.integer_or_auto("gradient_accumulation_steps", 1),
                               micro_batches = r.integer_or_auto("parallel.micro_batches", 1);
  if (steps && micro_batches && *steps != *micro_batches)
    fail(r.origin(), "'gradient_accumulation_steps' (" + std::to_string(*steps) + ") and 'parallel.micro_batches' (" +
                         std::to_string(*micro_batches) + ") are two names for the micro-batches of a step, and they differ; "
                         "give one of them");
  return steps ? steps : micro_batches;
}

// DeepSpeed's rule: train_batch_size = micro × accumulation × dp; any one may be "auto" (derived
// from the others), and when all are given they must agree.
void resolve_batch(const Reader& r, TrainConfig& c) {
  const std::optional<int64_t> given_b = r.integer_or_auto("train_batch_size", 1),
                               given_m = r.integer_or_auto("train_micro_batch_size_per_gpu", 1),
                               given_a = accumulation_steps(r);
  const bool has_b = given_b.has_value(), has_m = given_m.has_value(), has_a = given_a.has_value();
  int64_t b = given_b.value_or(0), m = given_m.value_or(0), a = given_a.value_or(0);
  const int64_t dp = c.dp;
  auto explain = [&] {
    return "train_batch_size (" + (has_b ? std::to_string(b) : "auto") + ") must equal train_micro_batch_size_per_gpu (" +
           (has_m ? std::to_string(m) : "auto") + ") × gradient_accumulation_steps (" + (has_a ? std::to_string(a) : "auto") +
           ") × data-parallel size (" + std::to_string(dp) + ")";
  };
  auto times = [&](int64_t x, int64_t y) {
    int64_t product;
    if (__builtin_mul_overflow(x, y, &product)) fail(r.origin(), explain() + ", and that product overflows a 64-bit integer");
    return product;
  };
  auto divide = [&](int64_t total, int64_t by) {
    if (total % by != 0) fail(r.origin(), explain() + ", and " + std::to_string(total) + " is not divisible by " + std::to_string(by));
    return total / by;
  };
  if (has_b && has_m && has_a) {
    if (b != times(times(m, a), dp)) fail(r.origin(), explain() + " = " + std::to_string(m * a * dp));
  } else if (has_b && has_m) {
    a = divide(b, times(m, dp));
  } else if (has_b && has_a) {
    m = divide(b, times(a, dp));
  } else if (has_m && has_a) {
    b = times(times(m, a), dp);
  } else if (has_b) {
    a = 1;
    m = divide(b, dp);
  } else if (has_m) {
    a = 1;
    b = times(m, dp);
  } else {
    // Neither the micro-batch nor the global batch given: memory decides the micro-batch when the
    // run starts (train/auto_micro_batch.h). With the accumulation given (the Hugging Face Trainer's
    // configs), up to TrainConfig::kAutoMicroBatchCap; with no batch key at all, up to the default of 8, which it
    // only lowers.
    m = 8;
    a = has_a ? a : 1;
    b = times(times(m, a), dp);
    c.micro_batch_auto_cap = has_a ? TrainConfig::kAutoMicroBatchCap : m;
  }
  c.global_batch = b;
  c.global_batch_given = has_b;
  c.micro_batch = m;
  c.accumulation = a;
  c.json["train_batch_size"] = b;
  c.json["train_micro_batch_size_per_gpu"] = m;
  c.json["gradient_accumulation_steps"] = a;
  c.json["parallel"]["micro_batches"] = a;
}

// A run saves a checkpoint at its end (checkpoint.save_at_end), at train.stop_at_step, every
// checkpoint.every_steps steps and every checkpoint.every_hours hours; one that does none of these
// leaves nothing to resume after a failure, or to sample from.
void warn_if_no_checkpoint(TrainConfig& c) {
  const CheckpointOptions& k = c.checkpoint;
  if (k.save_at_end || c.stop_at_step > 0 || k.every_hours > 0 || (k.every_steps > 0 && k.every_steps <= c.steps)) return;
  const std::string every = k.every_steps == 0 ? "checkpoint.every_steps is 0"
                                               : "checkpoint.every_steps (" + std::to_string(k.every_steps) + ") is past train.steps (" +
                                                     std::to_string(c.steps) + ")";
  c.warnings.push_back(c.origin + ": this run saves no checkpoint (checkpoint.save_at_end is false, " + every +
                       ", checkpoint.every_hours is 0): a failure loses all of it, and nothing is left to resume or sample from");
}

}  // namespace dtrain

#include "train/train_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "common/memory_size.h"
#include "common/printable.h"
#include "common/printable_json.h"
#include "common/wait_limit.h"
#include "model/mixed_precision.h"
#include "optim/flat_optimizer.h"
#include "train/config_model.h"
#include "optim/lr_schedule.h"
#include "train/config_schema.h"
#include "train/config_sections.h"
#include "train/context_parallel_rules.h"
#include "train/failure_injection.h"
#include "train/freeze_globs.h"
#include "train/pipeline_config.h"
#include "train/tensor_parallel_rules.h"
#include "train/vision_language_rules.h"

namespace dtrain {

using json = nlohmann::json;

TrainConfig resolve_config(const json& user, int world_size, const std::string& origin) {
  TrainConfig c;
  c.origin = origin;
  c.json = config_defaults();
  json given = user;
  drop_moved_keys(given, c);
  merge_checked(c.json, given, "", origin);
  const Reader r(c.json, origin);
  check_unused_deepspeed_keys(r);

  c.model = resolve_model(r);
  c.init_from = r.text("model.init_from");
  c.json["model"].update(to_json(c.model));
  c.data_source = r.text("data.source");
  c.tokenizer = r.text("data.tokenizer");
  if (!c.tokenizer.empty()) c.json["data"]["tokenizer"] = c.tokenizer = std::filesystem::absolute(c.tokenizer).lexically_normal().string();
  c.val_fraction = r.number("data.val_fraction", 0);
  if (c.val_fraction >= 1) fail(origin, "'data.val_fraction' must be below 1");
  c.shuffle = r.boolean("data.shuffle");
  try {
    c.shuffle_order = parse_shuffle_order(r.text("data.shuffle_order"));
  } catch (const std::invalid_argument& e) {
    fail(origin, "'data.shuffle_order' " + std::string(e.what()) + ", got " + printable_json(r.at("data.shuffle_order")));
  }

  c.max_image_tokens = r.integer("data.max_image_tokens", 1);
  c.max_image_pixels = r.integer("data.max_image_pixels", 1);
  c.skip_bad_samples = r.boolean("data.skip_bad_samples");
  c.ocr_random_lines = r.integer("data.ocr_random_lines", 0, 10000000);

  c.world_size = world_size;
  resolve_parallel_dims(r, c);
  check_vision_language(r, c);
  check_tensor_parallel(c);
  check_context_parallel(c);
  resolve_batch(r, c);

  c.steps = r.integer("train.steps", 1);
  c.stop_at_step = r.integer("train.stop_at_step", 0);
  if (c.stop_at_step > c.steps)  // it would never trigger: a stop the user asked for, silently ignored
    fail(origin, "'train.stop_at_step' (" + std::to_string(c.stop_at_step) + ") is past 'train.steps' (" +
                     std::to_string(c.steps) + "), so the run would never stop there");
  c.seed = uint64_t(r.integer("train.seed", 0));
  c.deterministic = r.boolean("train.deterministic");
  c.trace = r.boolean("train.trace");
  resolve_profile_steps(r, c);
  c.resume = r.text("train.resume");
  if (c.resume.empty()) fail(origin, "'train.resume' must be \"auto\", \"never\" or a checkpoint's path, got \"\"");
  // "ckpt/step-00000020/", as a shell completes it, is that step: without the slash its parent is the
  // checkpoint directory, which the start rules and the lineage go by.
  while (c.resume.size() > 1 && c.resume.back() == '/') c.resume.pop_back();
  c.start_over = r.boolean("train.start_over");
  if (!r.at("train.freeze").is_array()) fail(origin, "'train.freeze' must be a list of parameter-name globs");
  for (const auto& g : r.at("train.freeze")) {
    if (!g.is_string()) fail(origin, "'train.freeze' entries must be strings, got " + printable_json(g));
    c.freeze.push_back(g.get<std::string>());
  }
  c.run_dir = r.text("train.run_dir");
  // More threads than any machine has cores only fails later, inside OpenMP's thread creation.
  c.threads = r.small_integer("train.threads", 0, 4096);
  try {
    c.activation_checkpointing = ActivationCheckpointing::parse(r.text("train.activation_checkpointing"));
  } catch (const std::invalid_argument&) {
    fail(origin, "'train.activation_checkpointing' must be \"none\", \"full\", \"selective\" or \"every:N\" (N >= 1), got " +
                     printable_json(r.at("train.activation_checkpointing")));
  }
  resolve_activation_store(r, c);
  resolve_precision(r, c);
  c.eval_every = r.integer("train.eval_every", 0);
  c.eval_samples = r.integer("train.eval_samples", 1);
  c.stability.spike_factor = r.number("train.spike_factor", 0);
  c.stability.window = r.small_integer("train.spike_window", 1);
  c.stability.skip_spikes = r.boolean("train.skip_spikes");
  c.stability.divergence_steps = r.small_integer("train.divergence_steps", 0);
  c.on_divergence = r.text("train.on_divergence");
  if (c.on_divergence != "stop" && c.on_divergence != "rollback")
    fail(origin, "'train.on_divergence' must be \"stop\" or \"rollback\", got " + printable_json(c.on_divergence));
  c.rollback_lr_factor = r.number("train.rollback_lr_factor", 0);
  if (c.rollback_lr_factor <= 0 || c.rollback_lr_factor > 1) fail(origin, "'train.rollback_lr_factor' must be in (0, 1]");
  c.max_rollbacks = r.small_integer("train.max_rollbacks", 0);
  c.peak_flops = r.number("train.peak_flops", 0);
  if (!r.is_auto("train.memory_budget")) {
    const nlohmann::json& budget = r.at("train.memory_budget");
    const std::optional<double> bytes = budget.is_string() ? parse_memory_size(budget.get<std::string>())
                                        : budget.is_number() && budget.get<double>() > 0 ? std::optional<double>(budget.get<double>())
                                                                                         : std::nullopt;
    if (!bytes) fail(origin, "'train.memory_budget' must be \"auto\" or a memory size (24GiB, 80GB, 16G or bytes), got " + printable_json(budget));
    c.memory_budget = *bytes;
  }

  c.gradient_clipping = r.number("gradient_clipping", 0);
  c.steps_per_print = r.integer("steps_per_print", 1);
  c.wall_clock_breakdown = r.boolean("wall_clock_breakdown");
  c.reduce_bucket_elements = r.integer("zero_optimization.reduce_bucket_size", 1);
  resolve_sharding(r, c);
  c.offload_optimizer = resolve_offload(r, "zero_optimization.offload_optimizer", 1, c.zero_stage);
  c.offload_param = resolve_offload(r, "zero_optimization.offload_param", 3, c.zero_stage);
  c.sub_group_size = r.integer_or_auto("zero_optimization.sub_group_size", 1);
  resolve_stage3_keys(r, c);
  resolve_pipeline(r, c);
  r.text("optimizer.type");  // read here so that a type that is no string is named, not a JSON type_error
  r.text("scheduler.type");
  c.optimizer = c.json["optimizer"];
  c.scheduler = c.json["scheduler"];
  try {  // built once here so `config check` reports their parameters' mistakes too
    c.base_lr = make_flat_optimizer(c.optimizer, at::zeros({1}))->base_lr();
    const LrSchedule schedule(c.scheduler, c.base_lr, c.steps);
    if (schedule.warmup_steps() >= c.steps)
      c.warnings.push_back(origin + ": the " + schedule.type() + " schedule warms up for " + std::to_string(schedule.warmup_steps()) +
                           " steps (" + schedule.warmup_key() + ") and the run has " + std::to_string(c.steps) +
                           " (train.steps): the learning rate never reaches the rate it warms up to");
  } catch (const std::invalid_argument& e) {
    fail(origin, e.what());
  }

  c.checkpoint.dir = r.text("checkpoint.dir");
  c.checkpoint.every_steps = r.integer("checkpoint.every_steps", 0);
  c.checkpoint.every_hours = r.number("checkpoint.every_hours", 0);
  c.checkpoint.keep = r.small_integer("checkpoint.keep", 0);
  c.checkpoint.save_at_end = r.boolean("checkpoint.save_at_end");
  c.checkpoint.async = r.boolean("checkpoint.async");
  // After the checkpoint keys: an injection into a save names the kind of save the run makes.
  c.inject_failure = resolve_inject_failure(r, c);
  if (!c.inject_failure.empty()) c.warnings.push_back(fault_injection_armed_line(c.inject_failure));
  warn_if_no_checkpoint(c);
  c.batch_policy = r.text("elastic.batch_policy");
  if (c.batch_policy != "keep" && c.batch_policy != "scale_lr" && c.batch_policy != "fail")
    fail(origin, "'elastic.batch_policy' must be \"keep\", \"scale_lr\" or \"fail\", got " + printable_json(c.batch_policy));
  c.backend = r.text("dist.backend");
  if (c.backend != "auto" && c.backend != "shm" && c.backend != "gloo" && c.backend != "nccl")
    fail(origin, "'dist.backend' must be \"auto\", \"shm\", \"gloo\" or \"nccl\", got " + printable_json(c.backend));
  c.timeout_s = r.number("dist.timeout_s", 1, kMaxWaitSeconds);
  return c;
}

void resolve_shard_group_per_node(TrainConfig& c, int node_ranks) {
  if (!c.shard_groups_per_node) return;
  if (node_ranks < 1 || c.dp % node_ranks != 0)
    throw ConfigError("parallel.fsdp.shard_group_size: a node's " + std::to_string(node_ranks) + " rank(s) do not divide the " +
                      std::to_string(c.dp) + " data-parallel ranks; give the size");
  c.shard_groups_per_node = false;
  split_into_shard_groups(c, node_ranks);
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& sets, int world_size) {
  std::vector<std::string> warnings;
  json user = read_config_file(path, &warnings);
  const std::vector<std::string> set_warnings = apply_overrides(user, sets);
  warnings.insert(warnings.end(), set_warnings.begin(), set_warnings.end());
  // A --set value at fault is named by its key; the origin says the file is not all there is.
  const std::string origin = (path.empty() ? "demo config" : printable(path)) + (sets.empty() ? "" : " with --set");
  TrainConfig config = resolve_config(user, world_size, origin);
  config.config_path = path;
  warnings.insert(warnings.end(), config.warnings.begin(), config.warnings.end());
  config.warnings = warnings;
  return config;
}

bool TrainConfig::freezes(const std::string& name) const {
  return modules.freezes(name) ||
         std::any_of(freeze.begin(), freeze.end(), [&](const std::string& glob) { return freeze_glob_matches(glob, name); });
}

}  // namespace dtrain

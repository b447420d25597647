#include "train/train_config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <sstream>

#include "common/printable.h"
#include "common/printable_json.h"
#include "common/range_words.h"
#include "common/regular_file.h"
#include "common/wait_limit.h"
#include "model/mixed_precision.h"
#include "optim/flat_optimizer.h"
#include "optim/lr_schedule.h"
#include "train/config_schema.h"

namespace dtrain {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& msg) { throw ConfigError(origin + ": " + msg); }

std::string join(const std::string& prefix, const std::string& key) { return prefix.empty() ? key : prefix + "." + key; }

// nlohmann's message without its "[json.exception.parse_error.101] " prefix, made printable: it
// quotes the text it last read, which in a binary file is anything.
std::string json_error_text(const json::exception& e) {
  const std::string what = e.what();
  const size_t end = what.find("] ");
  return printable(end == std::string::npos ? what : what.substr(end + 2), 400);
}

// The value at `path` in `j`, or null where there is none.
const json& value_at(const json& j, const std::vector<std::string>& path) {
  static const json none;
  const json* node = &j;
  for (const auto& part : path) {
    if (!node->is_object() || !node->contains(part)) return none;
    node = &(*node)[part];
  }
  return *node;
}

std::string dotted(const std::vector<std::string>& path) {
  std::string key;
  for (const auto& part : path)
    if (!part.empty()) key = join(key, part);
  return key;
}

// Parses JSON text for the config, with three checks nlohmann leaves to the caller: a number too
// large for a double (its "number overflow" carries no position) is reported against the dotted key
// being read; nesting is capped, as copying or printing a value nested 100,000 deep recurses until
// the stack runs out; and a key given twice in one object, of which nlohmann silently keeps the
// last, adds a line to `warnings` naming the key and the value that wins.
json parse_config_json(const std::string& text, const std::string& source, std::vector<std::string>& warnings) {
  constexpr int kMaxDepth = 32;  // the deepest key is 3 levels down, its value a list
  std::vector<std::string> path;
  std::vector<std::set<std::string>> seen;  // the keys met so far in each open object, by the depth of its keys
  std::vector<std::pair<std::vector<std::string>, int>> repeated;  // key path, times given
  auto track = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) {
      path.resize(size_t(depth));
      path[size_t(depth) - 1] = parsed.get<std::string>();
      if (!seen[size_t(depth)].insert(path.back()).second) {
        auto it = std::find_if(repeated.begin(), repeated.end(), [&](const auto& r) { return r.first == path; });
        if (it == repeated.end()) repeated.emplace_back(path, 2);
        else ++it->second;
      }
    }
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxDepth)
      throw ConfigError(source + ": nests objects and lists deeper than " + std::to_string(kMaxDepth) +
                        " levels; a config needs a handful");
    if (event == json::parse_event_t::object_start) {
      seen.resize(size_t(depth) + 2);
      seen[size_t(depth) + 1].clear();
    }
    return true;
  };
  json parsed;
  try {
    // Comments (// and /* */) are skipped: users annotate their ds_config.json files with them.
    parsed = json::parse(text, track, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::out_of_range&) {
    const std::string key = dotted(path);
    throw ConfigError(source + ": the number" + (key.empty() ? "" : " at '" + printable(key) + "'") +
                      " is out of range for a double (whose magnitude ends near 1.8e308)");
  }
  for (const auto& [key, times] : repeated)
    warnings.push_back(source + ": '" + printable(dotted(key)) + "' is given " + std::to_string(times) + " times in one object; the last, " +
                       printable(printable_json(value_at(parsed, key)), 80) + ", is used and the others are ignored");
  return parsed;
}

// Overlays `user` on `base`, rejecting keys the schema lacks.
void merge_checked(json& base, const json& user, const std::string& prefix, const std::string& origin) {
  if (!user.is_object())
    fail(origin, (prefix.empty() ? std::string("the config") : "'" + prefix + "'") + " must be a JSON object, got " + printable_json(user));
  for (auto it = user.begin(); it != user.end(); ++it) {
    const std::string path = join(prefix, it.key());
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

// Typed reads from the merged config, each naming its key when the type is wrong.
class Reader {
 public:
  Reader(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}
  const json& at(const std::string& dotted) const {
    const json* node = &j_;
    std::istringstream parts(dotted);
    for (std::string part; std::getline(parts, part, '.');) node = &node->at(part);
    return *node;
  }
  bool is_auto(const std::string& key) const { return at(key).is_string() && at(key) == "auto"; }
  bool is_null(const std::string& key) const { return at(key).is_null(); }
  // A whole number in [min_value, max_value]. JSON may spell it as a signed, an unsigned or a
  // floating-point number (1e3); whether it fits an int64 is checked before any cast, which for a
  // value like 1e30 or 2^63 would be undefined.
  int64_t integer(const std::string& key, int64_t min_value, int64_t max_value = INT64_MAX) const {
    const json& v = at(key);
    const bool whole = v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
    if (!whole) fail(origin_, "'" + key + "' must be a whole number, got " + printable_json(v));
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT64_MAX)
                      : v.is_number_integer() ? true
                                              : v.get<double>() >= -0x1p63 && v.get<double>() < 0x1p63;
    if (!fits)
      fail(origin_, "'" + key + "' must be " + range_words(min_value, max_value) + " and fit a 64-bit integer (at most " +
                        std::to_string(INT64_MAX) + "), got " + printable_json(v));
    const int64_t x = v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
    if (x < min_value || x > max_value) fail(origin_, "'" + key + "' must be " + range_words(min_value, max_value) + ", got " + printable_json(v));
    return x;
  }
  // "auto" (nullopt), or a whole number as integer() reads it.
  std::optional<int64_t> integer_or_auto(const std::string& key, int64_t min_value, int64_t max_value = INT64_MAX) const {
    if (is_auto(key)) return std::nullopt;
    if (!at(key).is_number())
      fail(origin_, "'" + key + "' must be \"auto\" or a whole number " + range_words(min_value, max_value) + ", got " + printable_json(at(key)));
    return integer(key, min_value, max_value);
  }
  // A whole number that is stored in an int.
  int small_integer(const std::string& key, int min_value, int max_value = INT_MAX) const {
    return int(integer(key, min_value, max_value));
  }
  double number(const std::string& key, double min_value, double max_value = INFINITY) const {
    const json& v = at(key);
    if (!v.is_number()) fail(origin_, "'" + key + "' must be a number, got " + printable_json(v));
    const double x = v.get<double>();
    if (x < min_value || x > max_value) fail(origin_, "'" + key + "' must be " + range_words(min_value, max_value) + ", got " + printable_json(v));
    return x;
  }
  bool boolean(const std::string& key) const {
    if (!at(key).is_boolean()) fail(origin_, "'" + key + "' must be true or false, got " + printable_json(at(key)));
    return at(key).get<bool>();
  }
  std::string text(const std::string& key) const {
    if (!at(key).is_string()) fail(origin_, "'" + key + "' must be a string, got " + printable_json(at(key)));
    return at(key).get<std::string>();
  }
  const std::string& origin() const { return origin_; }

 private:
  const json& j_;
  std::string origin_;
};

// Keys for features not built yet: DeepSpeed configs carry some, and dtrain's own layout reserves
// the others. Their default is the only value accepted; any other is refused, never silently ignored.
void reject_unbuilt(const Reader& r) {
  static const std::pair<const char*, const char*> later[] = {
      {"activation_checkpointing.partition_activations", "partitioning activation checkpoints across ranks"},
      {"activation_checkpointing.cpu_checkpointing", "keeping activation checkpoints in host memory"},
      {"activation_checkpointing.contiguous_memory_optimization", "copying activation checkpoints into one buffer"},
      {"activation_checkpointing.number_checkpoints", "DeepSpeed's count of activation checkpoints"},
      {"parallel.tp", "tensor parallelism"},
      {"parallel.pp", "pipeline parallelism"},
      {"parallel.cp", "context parallelism"},
      {"parallel.sequence_parallel", "sequence parallelism"},
      {"parallel.pipeline_schedule", "pipeline parallelism"},
      {"checkpoint.async", "asynchronous checkpointing"},
  };
  const Reader defaults(config_defaults(), "");
  for (const auto& [key, feature] : later)
    if (r.at(key) != defaults.at(key))
      fail(r.origin(), "'" + std::string(key) + "' is " + printable_json(r.at(key)) + ", but " + feature +
                           " is not implemented yet in this version of dtrain; remove the key or set it to its default " +
                           defaults.at(key).dump());
}

// DeepSpeed's tuning keys that dtrain accepts and does not use (docs/config.md says what it does
// instead): their values are checked all the same, so a mistake in one is named, not carried along.
void check_unused_deepspeed_keys(const Reader& r) {
  for (const char* key : {"overlap_comm", "contiguous_gradients", "reduce_scatter", "allgather_partitions", "round_robin_gradients",
                          "stage3_gather_16bit_weights_on_model_save"})
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

// What ZeRO stage 3 does in DeepSpeed's terms, where the config says "auto": it gathers one unit
// ahead of its use (a unit is at most a forward part: a block, the embeddings, or the final norm
// and head), and keeps no parameter whole for being small. Below stage 3 nothing is gathered.
void resolve_stage3_keys(const Reader& r, TrainConfig& c) {
  json& z = c.json["zero_optimization"];
  if (!r.integer_or_auto("zero_optimization.stage3_prefetch_bucket_size", 0))
    z["stage3_prefetch_bucket_size"] = c.zero_stage == 3 ? c.model.largest_part_parameters() : 0;
  if (!r.integer_or_auto("zero_optimization.stage3_param_persistence_threshold", 0)) z["stage3_param_persistence_threshold"] = 0;
}

// The mesh's dims for the job's ranks: parallel.dp ("auto": what the other dims leave of the world)
// as dp_shard; tp, pp and cp are 1 until they land (reject_unbuilt refuses other values).
void resolve_parallel_dims(const Reader& r, TrainConfig& c) {
  ParallelDims dims;
  dims.pp = r.small_integer("parallel.pp", 1);
  dims.cp = r.small_integer("parallel.cp", 1);
  dims.tp = r.small_integer("parallel.tp", 1);
  if (const auto dp = r.integer_or_auto("parallel.dp", 1, INT_MAX)) dims.dp_shard = int(*dp);
  try {
    c.parallel = dims.resolved(c.world_size);
  } catch (const std::invalid_argument& e) {
    fail(r.origin(), e.what());
  }
  c.dp = c.parallel.dp();
  c.json["parallel"]["dp"] = c.dp;
}

// Hybrid sharding's shard groups of `size` ranks as mesh dims: dp_shard within a group, dp_replicate
// across the groups. The caller has checked that `size` divides dp.
void shard_groups_of(TrainConfig& c, int size) {
  c.parallel.dp_replicate = c.dp / size;
  c.parallel.dp_shard = size;
  c.json["parallel"]["fsdp"]["shard_group_size"] = size;
}

// zero_optimization.stage and FSDP's words for the same thing: parallel.fsdp.sharding_strategy
// full_shard is stage 3, shard_grad_op stage 3 keeping parameters whole from forward to backward,
// no_shard plain data parallelism. Either may be given; both only when they agree.
void resolve_sharding(const Reader& r, TrainConfig& c) {
  c.zero_stage = int(r.integer("zero_optimization.stage", 0, 3));
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
  c.reshard_after_forward = strategy != "shard_grad_op";
  // Without hybrid sharding every data-parallel rank is in the one group, which the resolved config
  // says; with it, "auto" is a node's ranks, which the trainer learns and writes.
  const std::optional<int64_t> group = r.integer_or_auto("parallel.fsdp.shard_group_size", 1, INT_MAX);
  if (strategy == "hybrid_shard") {
    c.shard_groups_per_node = !group;
    if (group && c.dp % *group != 0)
      fail(r.origin(), "'parallel.fsdp.shard_group_size' is " + std::to_string(*group) + ", which does not divide the " +
                           std::to_string(c.dp) + " data-parallel ranks");
    if (group) shard_groups_of(c, int(*group));
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

TransformerConfig resolve_model(const Reader& r) {
  TransformerConfig m;
  try {
    m = model_preset(r.text("model.preset"));
  } catch (const std::invalid_argument& e) {
    fail(r.origin(), e.what());
  }
  auto int_key = [&](const char* key, int& field) {
    if (!r.is_null(std::string("model.") + key)) field = r.small_integer(std::string("model.") + key, 0);
  };
  if (!r.is_null("model.arch")) m.arch = r.text("model.arch");
  int_key("n_layer", m.n_layer);
  int_key("n_head", m.n_head);
  int_key("n_kv_head", m.n_kv_head);
  int_key("d_model", m.d_model);
  int_key("d_ff", m.d_ff);
  int_key("seq_len", m.seq_len);
  int_key("vocab_size", m.vocab_size);
  if (!r.is_null("model.tie_embeddings")) m.tie_embeddings = r.boolean("model.tie_embeddings");
  if (!r.is_null("model.norm_eps")) m.norm_eps = r.number("model.norm_eps", 0);
  if (!r.is_null("model.rope_theta")) m.rope_theta = r.number("model.rope_theta", 1);
  try {
    m.validate();
  } catch (const std::invalid_argument& e) {
    fail(r.origin(), e.what());
  }
  return m;
}

// DeepSpeed's rule: train_batch_size = micro × accumulation × dp; any one may be "auto" (derived
// from the others), and when all are given they must agree.
void resolve_batch(const Reader& r, TrainConfig& c) {
  const std::optional<int64_t> given_b = r.integer_or_auto("train_batch_size", 1),
                               given_m = r.integer_or_auto("train_micro_batch_size_per_gpu", 1),
                               given_a = r.integer_or_auto("gradient_accumulation_steps", 1);
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
  } else if (has_a) {
    fail(r.origin(), "gradient_accumulation_steps alone does not fix the batch: set train_batch_size or train_micro_batch_size_per_gpu too");
  } else {
    m = 8;
    a = 1;
    b = m * dp;
  }
  c.global_batch = b;
  c.global_batch_given = has_b;
  c.micro_batch = m;
  c.accumulation = a;
  c.json["train_batch_size"] = b;
  c.json["train_micro_batch_size_per_gpu"] = m;
  c.json["gradient_accumulation_steps"] = a;
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

// After a --set of `section`.type: the params the new type does not take (left from the config's
// own type) are dropped, each named in a warning, rather than refused as unknown to it.
void drop_params_of_other_types(const std::string& section, json& node, const std::string& where, std::vector<std::string>& warnings) {
  if (!node["type"].is_string() || !node.contains("params") || !node["params"].is_object()) return;
  const std::string type = node["type"].get<std::string>();
  const auto known = section == "optimizer" ? optimizer_param_names(type) : schedule_param_names(type);
  if (!known) return;  // an unknown type is refused by name when the config resolves
  std::vector<std::string> dropped;
  for (const auto& item : node["params"].items())
    if (!known->count(item.key())) dropped.push_back(item.key());
  if (dropped.empty()) return;
  std::string names;
  for (size_t i = 0; i < dropped.size(); ++i) {
    node["params"].erase(dropped[i]);
    names += (i == 0 ? "" : i + 1 == dropped.size() ? " and " : ", ") + section + ".params." + printable(dropped[i]);
  }
  warnings.push_back(where + " dropped " + names + ", which " + printable(type) + " does not take");
}

}  // namespace

const json& demo_config() {
  static const json demo = json::parse(R"({
    "model": {"preset": "demo"},
    "data": {"source": "builtin", "val_fraction": 0.05},
    "train_micro_batch_size_per_gpu": 8,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "betas": [0.9, 0.95], "weight_decay": 0.1}},
    "scheduler": {"type": "cosine", "params": {"warmup_steps": 30, "min_ratio": 0.1}},
    "steps_per_print": 25,
    "train": {"steps": 600, "eval_every": 200},
    "checkpoint": {"every_steps": 200, "keep": 2}
  })");
  return demo;
}

std::string default_run_dir() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&seconds));
  // Milliseconds and the pid: two runs started in the same second on one host never share a directory.
  char unique[32];
  std::snprintf(unique, sizeof unique, ".%03d-%d", int(ms), int(::getpid()));
  return std::string("runs/") + stamp + unique;
}

json read_config_file(const std::string& path, std::vector<std::string>* warnings) {
  if (path.empty()) return demo_config();
  const std::string source = "config file '" + printable(path) + "'";
  const FileContents file = read_regular_file(path);
  if (!file.problem.empty()) throw ConfigError(source + " " + file.problem);
  if (file.bytes.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ConfigError(source + " is empty; a config is a JSON object, {} at the least");
  if (file.bytes.find('\0') != std::string::npos) throw ConfigError(source + " is binary (it holds NUL bytes), not JSON text");
  json config;
  std::vector<std::string> repeated_keys;
  try {
    config = parse_config_json(file.bytes, source, repeated_keys);
  } catch (const json::parse_error& e) {
    throw ConfigError(source + " is not valid JSON: " + json_error_text(e));
  }
  if (!config.is_object()) throw ConfigError(source + " must hold a JSON object ({...}), got " + printable_json(config));
  if (warnings) warnings->insert(warnings->end(), repeated_keys.begin(), repeated_keys.end());
  return config;
}

std::vector<std::string> apply_overrides(json& config, const std::vector<std::string>& sets) {
  std::vector<std::string> warnings;
  for (const auto& s : sets) {
    const std::string where = "--set '" + printable(s) + "'";
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError(where + " must look like dotted.key=value");
    try {
      json(s).dump();  // the config is JSON, written to config.json and every checkpoint: UTF-8 only
    } catch (const json::type_error&) {
      throw ConfigError(where + " is not UTF-8 text, which a JSON config must be");
    }
    const std::string key = s.substr(0, eq), text = s.substr(eq + 1);
    json value;
    try {
      value = parse_config_json(text, where, warnings);
    } catch (const json::parse_error&) {
      value = text;  // a bare word is a string: --set data.source=text:corpus.txt
    }
    json* node = &config;
    std::istringstream parts(key);
    std::vector<std::string> path;
    for (std::string part; std::getline(parts, part, '.');) path.push_back(part);
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      json& next = (*node)[path[i]];
      if (next.is_null()) next = json::object();
      if (!next.is_object()) throw ConfigError(where + ": '" + printable(path[i]) + "' is not a section");
      node = &next;
    }
    (*node)[path.back()] = value;
    if (path.size() == 2 && path[1] == "type" && (path[0] == "optimizer" || path[0] == "scheduler"))
      drop_params_of_other_types(path[0], *node, where, warnings);
  }
  return warnings;
}

TrainConfig resolve_config(const json& user, int world_size, const std::string& origin) {
  TrainConfig c;
  c.origin = origin;
  c.json = config_defaults();
  merge_checked(c.json, user, "", origin);
  const Reader r(c.json, origin);
  reject_unbuilt(r);
  check_unused_deepspeed_keys(r);

  c.model = resolve_model(r);
  c.json["model"].update(to_json(c.model));
  c.data_source = r.text("data.source");
  c.val_fraction = r.number("data.val_fraction", 0);
  if (c.val_fraction >= 1) fail(origin, "'data.val_fraction' must be below 1");
  c.shuffle = r.boolean("data.shuffle");
  try {
    c.shuffle_order = parse_shuffle_order(r.text("data.shuffle_order"));
  } catch (const std::invalid_argument& e) {
    fail(origin, "'data.shuffle_order' " + std::string(e.what()) + ", got " + printable_json(r.at("data.shuffle_order")));
  }

  c.world_size = world_size;
  resolve_parallel_dims(r, c);
  resolve_batch(r, c);
  // Without pipeline parallelism a step's micro-batches are its accumulation steps.
  if (const auto micro_batches = r.integer_or_auto("parallel.micro_batches", 1); micro_batches && *micro_batches != c.accumulation)
    fail(origin, "'parallel.micro_batches' is " + std::to_string(*micro_batches) + ", but pipeline parallelism, where a step's micro-batches "
                 "could differ from its gradient_accumulation_steps (" + std::to_string(c.accumulation) + "), is not implemented yet in this "
                 "version of dtrain; remove the key or set it to \"auto\"");
  c.json["parallel"]["micro_batches"] = c.accumulation;

  c.steps = r.integer("train.steps", 1);
  c.stop_at_step = r.integer("train.stop_at_step", 0);
  if (c.stop_at_step > c.steps)  // it would never trigger: a stop the user asked for, silently ignored
    fail(origin, "'train.stop_at_step' (" + std::to_string(c.stop_at_step) + ") is past 'train.steps' (" +
                     std::to_string(c.steps) + "), so the run would never stop there");
  c.seed = uint64_t(r.integer("train.seed", 0));
  c.deterministic = r.boolean("train.deterministic");
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

  c.gradient_clipping = r.number("gradient_clipping", 0);
  c.steps_per_print = r.integer("steps_per_print", 1);
  c.wall_clock_breakdown = r.boolean("wall_clock_breakdown");
  c.reduce_bucket_elements = r.integer("zero_optimization.reduce_bucket_size", 1);
  resolve_sharding(r, c);
  c.offload_optimizer = resolve_offload(r, "zero_optimization.offload_optimizer", 1, c.zero_stage);
  c.offload_param = resolve_offload(r, "zero_optimization.offload_param", 3, c.zero_stage);
  c.sub_group_size = r.integer("zero_optimization.sub_group_size", 1);
  resolve_stage3_keys(r, c);
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
  warn_if_no_checkpoint(c);
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
  shard_groups_of(c, node_ranks);
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

}  // namespace dtrain

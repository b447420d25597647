#include "train/train_config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>
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

// Parses JSON text for the config, with two checks nlohmann leaves to the caller: a number too large
// for a double (its "number overflow" carries no position) is reported against the dotted key being
// read, and nesting is capped, as copying or printing a value nested 100,000 deep recurses until
// the stack runs out.
json parse_config_json(const std::string& text, const std::string& source) {
  constexpr int kMaxDepth = 32;  // the deepest key is 3 levels down, its value a list
  std::vector<std::string> path;
  auto track = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) {
      path.resize(size_t(depth));
      path[size_t(depth) - 1] = parsed.get<std::string>();
    }
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxDepth)
      throw ConfigError(source + ": nests objects and lists deeper than " + std::to_string(kMaxDepth) +
                        " levels; a config needs a handful");
    return true;
  };
  try {
    return json::parse(text, track);
  } catch (const json::out_of_range&) {
    std::string key;
    for (const auto& part : path)
      if (!part.empty()) key = join(key, part);
    throw ConfigError(source + ": the number" + (key.empty() ? "" : " at '" + printable(key) + "'") +
                      " is out of range for a double (whose magnitude ends near 1.8e308)");
  }
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

// Keys the config accepts (DeepSpeed configs carry them) whose features land in later releases.
// Setting them is an error, never silently ignored.
void reject_unimplemented(const Reader& r) {
  auto refuse = [&](const std::string& what) {
    fail(r.origin(), what + " is accepted but not implemented yet in this version of dtrain; remove it or set it back to its default");
  };
  for (const char* key : {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization"})
    if (r.boolean(std::string("activation_checkpointing.") + key)) refuse(std::string("activation_checkpointing.") + key);
  if (!r.is_null("activation_checkpointing.number_checkpoints")) refuse("activation_checkpointing.number_checkpoints");
  for (const char* key : {"tp", "pp", "cp"})
    if (r.integer(std::string("parallel.") + key, 1) != 1) refuse(std::string("parallel.") + key + " > 1");
  if (r.boolean("parallel.sequence_parallel")) refuse("parallel.sequence_parallel");
  if (r.boolean("checkpoint.async")) refuse("checkpoint.async");
  if (!r.is_auto("parallel.micro_batches")) refuse("parallel.micro_batches (pipeline parallelism)");
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
  if (!r.is_auto("parallel.fsdp.shard_group_size")) {
    if (strategy != "hybrid_shard")
      fail(r.origin(), "'parallel.fsdp.shard_group_size' applies to parallel.fsdp.sharding_strategy hybrid_shard, and this run "
                       "does not use it");
    c.shard_group_size = r.small_integer("parallel.fsdp.shard_group_size", 1);
    if (c.dp % c.shard_group_size != 0)
      fail(r.origin(), "'parallel.fsdp.shard_group_size' is " + std::to_string(c.shard_group_size) + ", which does not divide the " +
                           std::to_string(c.dp) + " data-parallel ranks");
  } else if (strategy == "hybrid_shard") {
    c.shard_group_size = TrainConfig::kShardGroupPerNode;
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
  const json& section = r.at(key);
  if (!section.is_object()) fail(r.origin(), "'" + key + "' must be an object like {\"device\": \"cpu\"}, got " + printable_json(section));
  static const std::vector<std::string> known = {"device", "nvme_path", "pin_memory", "buffer_count", "buffer_size", "max_in_cpu",
                                                 "fast_init", "ratio"};
  for (const auto& item : section.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      fail(r.origin(), "unknown key '" + key + "." + printable(item.key()) + "' (DeepSpeed's offload keys are device, nvme_path, "
                       "pin_memory, buffer_count, buffer_size, max_in_cpu, fast_init, ratio)");
  TrainConfig::Offload offload;
  if (!section.contains("device")) return offload;
  offload.device = r.text(key + ".device");
  const std::string& device = offload.device;
  if (device == "none") return offload;
  if (device != "cpu" && device != "nvme")
    fail(r.origin(), "'" + key + ".device' must be \"none\", \"cpu\" or \"nvme\", got " + printable_json(section["device"]));
  if (stage < min_stage)
    fail(r.origin(), "'" + key + ".device' " + device + " needs zero_optimization.stage " + std::to_string(min_stage) +
                         (min_stage < 3 ? " or above" : "") + ", and this run has stage " + std::to_string(stage));
  if (device == "nvme") {
    if (!section.contains("nvme_path")) fail(r.origin(), "'" + key + ".device' nvme needs '" + key + ".nvme_path', a directory on the fast disk");
    offload.nvme_path = r.text(key + ".nvme_path");
    if (offload.nvme_path.empty()) fail(r.origin(), "'" + key + ".nvme_path' is empty");
  }
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
  const bool has_b = !r.is_auto("train_batch_size"), has_m = !r.is_auto("train_micro_batch_size_per_gpu"),
             has_a = !r.is_auto("gradient_accumulation_steps");
  int64_t b = has_b ? r.integer("train_batch_size", 1) : 0;
  int64_t m = has_m ? r.integer("train_micro_batch_size_per_gpu", 1) : 0;
  int64_t a = has_a ? r.integer("gradient_accumulation_steps", 1) : 0;
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

json read_config_file(const std::string& path) {
  if (path.empty()) return demo_config();
  const std::string source = "config file '" + printable(path) + "'";
  const FileContents file = read_regular_file(path);
  if (!file.problem.empty()) throw ConfigError(source + " " + file.problem);
  if (file.bytes.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ConfigError(source + " is empty; a config is a JSON object, {} at the least");
  if (file.bytes.find('\0') != std::string::npos) throw ConfigError(source + " is binary (it holds NUL bytes), not JSON text");
  json config;
  try {
    config = parse_config_json(file.bytes, source);
  } catch (const json::parse_error& e) {
    throw ConfigError(source + " is not valid JSON: " + json_error_text(e));
  }
  if (!config.is_object()) throw ConfigError(source + " must hold a JSON object ({...}), got " + printable_json(config));
  return config;
}

void apply_overrides(json& config, const std::vector<std::string>& sets) {
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
      value = parse_config_json(text, where);
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
  }
}

TrainConfig resolve_config(const json& user, int world_size, const std::string& origin) {
  TrainConfig c;
  c.origin = origin;
  c.json = config_defaults();
  merge_checked(c.json, user, "", origin);
  const Reader r(c.json, origin);
  reject_unimplemented(r);

  c.model = resolve_model(r);
  c.json["model"].update(to_json(c.model));
  c.data_source = r.text("data.source");
  c.val_fraction = r.number("data.val_fraction", 0);
  if (c.val_fraction >= 1) fail(origin, "'data.val_fraction' must be below 1");
  c.shuffle = r.boolean("data.shuffle");

  c.world_size = world_size;
  c.dp = world_size;  // tp = pp = cp = 1 until those land
  if (!r.is_auto("parallel.dp") && r.integer("parallel.dp", 1) != c.dp)
    fail(origin, "'parallel.dp' is " + printable_json(r.at("parallel.dp")) + " but the job has " + std::to_string(world_size) +
                     " ranks (dp × tp × pp × cp must equal the world size)");
  c.json["parallel"]["dp"] = c.dp;
  resolve_batch(r, c);

  c.steps = r.integer("train.steps", 1);
  c.stop_at_step = r.integer("train.stop_at_step", 0);
  if (c.stop_at_step > c.steps)  // it would never trigger: a stop the user asked for, silently ignored
    fail(origin, "'train.stop_at_step' (" + std::to_string(c.stop_at_step) + ") is past 'train.steps' (" +
                     std::to_string(c.steps) + "), so the run would never stop there");
  c.seed = uint64_t(r.integer("train.seed", 0));
  c.deterministic = r.boolean("train.deterministic");
  c.resume = r.text("train.resume");
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
  r.text("optimizer.type");  // read here so that a type that is no string is named, not a JSON type_error
  r.text("scheduler.type");
  c.optimizer = c.json["optimizer"];
  c.scheduler = c.json["scheduler"];
  try {  // built once here so `config check` reports their parameters' mistakes too
    c.base_lr = make_flat_optimizer(c.optimizer, at::zeros({1}))->base_lr();
    LrSchedule(c.scheduler, c.base_lr, c.steps);
  } catch (const std::invalid_argument& e) {
    fail(origin, e.what());
  }

  c.checkpoint.dir = r.text("checkpoint.dir");
  c.checkpoint.every_steps = r.integer("checkpoint.every_steps", 0);
  c.checkpoint.every_hours = r.number("checkpoint.every_hours", 0);
  c.checkpoint.keep = r.small_integer("checkpoint.keep", 0);
  c.checkpoint.save_at_end = r.boolean("checkpoint.save_at_end");
  c.backend = r.text("dist.backend");
  if (c.backend != "auto" && c.backend != "gloo" && c.backend != "nccl")
    fail(origin, "'dist.backend' must be \"auto\", \"gloo\" or \"nccl\", got " + printable_json(c.backend));
  c.timeout_s = r.number("dist.timeout_s", 1, kMaxWaitSeconds);
  return c;
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& sets, int world_size) {
  json user = read_config_file(path);
  apply_overrides(user, sets);
  // A --set value at fault is named by its key; the origin says the file is not all there is.
  const std::string origin = (path.empty() ? "demo config" : printable(path)) + (sets.empty() ? "" : " with --set");
  TrainConfig config = resolve_config(user, world_size, origin);
  config.config_path = path;
  return config;
}

}  // namespace dtrain

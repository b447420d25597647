#include "train/train_config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <sstream>

#include "common/printable.h"
#include "common/printable_json.h"
#include "common/regular_file.h"
#include "optim/flat_optimizer.h"
#include "optim/lr_schedule.h"
#include "train/config_reader.h"
#include "train/config_schema.h"

namespace dtrain {

namespace {

using json = nlohmann::json;

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
    if (!part.empty()) key = join_key(key, part);
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

}  // namespace dtrain

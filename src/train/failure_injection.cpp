#include "train/failure_injection.h"

#include <algorithm>

namespace dtrain {

namespace {

const std::vector<std::string> kFields = {"rank", "step", "phase", "round"};

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + ("\"" + names[i] + "\"");
  return s;
}

std::string entry_key(size_t i) { return "train.inject_failure[" + std::to_string(i) + "]"; }

CrashAt read_entry(const nlohmann::json& entry, size_t i, const TrainConfig& c, const std::string& origin) {
  const std::string key = entry_key(i);
  if (!entry.is_object())
    fail(origin, "'train.inject_failure' entries must be objects like {\"rank\": 1, \"step\": 5, \"phase\": \"backward\"}; entry " +
                     std::to_string(i) + " is " + printable_json(entry));
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (std::find(kFields.begin(), kFields.end(), it.key()) == kFields.end())
      fail(origin, "'" + key + "' has an unknown field " + printable_json(it.key()) + "; its fields are " + quoted_list(kFields));
  for (const char* required : {"rank", "step", "phase"})
    if (!entry.contains(required)) fail(origin, "'" + key + "' has no \"" + required + "\" (" + printable_json(entry) + ")");
  // A Reader over {"train": {"inject_failure[i]": entry}} names each field by its whole key.
  const nlohmann::json wrapped = {{"train", {{"inject_failure[" + std::to_string(i) + "]", entry}}}};
  const Reader r(wrapped, origin);
  CrashAt at;
  at.rank = r.integer(key + ".rank", 0);
  at.step = r.integer(key + ".step", 1, c.steps);
  at.point = r.text(key + ".phase");
  at.round = entry.contains("round") ? r.integer(key + ".round", 0) : 0;
  const auto& phases = crash_point_names();
  if (std::find(phases.begin(), phases.end(), at.point) == phases.end())
    fail(origin, "'" + key + ".phase' must be " + quoted_list(phases) + ", got " + printable_json(at.point));
  if ((at.point == "manifest" || at.point == "commit") && at.rank != 0)
    fail(origin, "'" + key + "' names rank " + std::to_string(at.rank) + " at phase \"" + at.point +
                     "\", which only rank 0 reaches (it commits checkpoints)");
  const bool data_parallel_phase = at.point == "forward" || at.point == "backward" || at.point == "collective";
  if (data_parallel_phase && c.parallel.pp > 1)
    fail(origin, "'" + key + ".phase' \"" + at.point + "\" is a point of the data-parallel step, which a pipeline (parallel.pp " +
                     std::to_string(c.parallel.pp) + ") does not run; \"pipeline\" kills a stage mid-step");
  if (at.point == "pipeline" && c.parallel.pp == 1)
    fail(origin, "'" + key + ".phase' \"pipeline\" is reached only under pipeline parallelism (parallel.pp > 1)");
  if (at.point == "write" && c.checkpoint.async)
    fail(origin, "'" + key + ".phase' \"write\" is a point of a synchronous save; under checkpoint.async it is \"async_write\"");
  if (at.point == "async_write" && !c.checkpoint.async)
    fail(origin, "'" + key + ".phase' \"async_write\" is reached only by asynchronous saves (checkpoint.async: true)");
  return at;
}

}  // namespace

std::vector<CrashAt> resolve_inject_failure(const Reader& r, const TrainConfig& c) {
  const nlohmann::json& list = r.at("train.inject_failure");
  if (!list.is_array())
    fail(r.origin(), "'train.inject_failure' must be a list of {\"rank\", \"step\", \"phase\"[, \"round\"]} objects, got " + printable_json(list));
  std::vector<CrashAt> entries;
  for (size_t i = 0; i < list.size(); ++i) entries.push_back(read_entry(list[i], i, c, r.origin()));
  return entries;
}

void require_injected_ranks_exist(const std::vector<CrashAt>& entries, int world_size) {
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].rank >= world_size)
      throw ConfigError("'" + entry_key(i) + ".rank' is " + std::to_string(entries[i].rank) + ", and the job has " +
                        std::to_string(world_size) + " rank(s): the injection would never fire");
}

std::string fault_injection_armed_line(const std::vector<CrashAt>& entries) {
  std::string line = "fault injection armed (train.inject_failure): SIGKILL to ";
  for (size_t i = 0; i < entries.size(); ++i)
    line += (i ? "; " : "") + ("rank " + std::to_string(entries[i].rank) + " at step " + std::to_string(entries[i].step) + " (" +
                               entries[i].point + ") in round " + std::to_string(entries[i].round));
  return line + ". A run for real must not set this key";
}

}  // namespace dtrain

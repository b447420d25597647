#include "ckpt/crash_points.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>

#include "common/env_list.h"

namespace dtrain {

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// The config's entries, in DTRAIN_CRASH_AT's form: both front-ends are one list of entries.
std::vector<std::string>& armed_entries() {
  static std::vector<std::string> entries;
  return entries;
}

}  // namespace

std::string CrashAt::entry() const {
  return point + ":" + std::to_string(step) + ":" + std::to_string(round) + ":" + std::to_string(rank);
}

const std::vector<std::string>& crash_point_names() {
  static const std::vector<std::string> names = {"forward", "backward", "collective", "optimizer", "step",
                                                 "write",   "save",     "manifest",   "commit",    "pipeline", "async_write"};
  return names;
}

void arm_crash_points(const std::vector<CrashAt>& entries) {
  for (const auto& e : entries) armed_entries().push_back(e.entry());
}

bool crash_point_due(const char* point, int64_t step) {
  static const std::string here_suffix = ":" + env_or("DTRAIN_RESTART_COUNT", "0") + ":" + env_or("RANK", "0");
  const std::string entry = std::string(point) + ":" + std::to_string(step) + here_suffix;
  const auto& armed = armed_entries();
  return env_list_contains("DTRAIN_CRASH_AT", entry) || std::find(armed.begin(), armed.end(), entry) != armed.end();
}

void crash_point(const char* point, int64_t step) {
  if (crash_point_due(point, step)) ::raise(SIGKILL);
}

}  // namespace dtrain

// What the tests of `dtrain launch` and `dtrain run` share: their command lines, finding a launcher
// among the processes, and reading what it left in a run directory.
#pragma once
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"

namespace dtrain::test {

inline const std::string kBin = DTRAIN_BIN;
inline const std::string kSleeper = std::string(DTRAIN_TEST_BIN_DIR) + "/worker_sleep";

// `dtrain launch FLAGS -- PROGRAM`.
inline std::vector<std::string> launch(std::vector<std::string> flags, const std::vector<std::string>& program) {
  std::vector<std::string> argv{kBin, "launch"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

// A string no other test's processes carry, for finding this test's.
inline std::string unique_marker(const std::string& name) { return "dtrain-test-" + name + "-" + std::to_string(getpid()); }

// The `dtrain launch` or `dtrain run` this test started, found by its command line holding `marker`:
// the one whose parent is this test (its watchdog, a fork of it, has the same command line); 0 when
// there is none.
inline int launcher_pid(const std::string& marker, const std::string& command = "launch") {
  for (int pid : processes_with_markers({std::string(1, '\0') + command + std::string(1, '\0'), marker}))
    if (parent_pid(pid) == getpid()) return pid;
  return 0;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// The object in the file; an empty one when it is absent or malformed.
inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

}  // namespace dtrain::test

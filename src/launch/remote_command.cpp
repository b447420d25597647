#include "launch/remote_command.h"

#include <cstring>

extern char** environ;

namespace dtrain {

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::pair<std::string, std::string>> forwarded_environment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    const std::string name(*e, eq - *e);
    const bool forwarded = name.rfind("DTRAIN_", 0) == 0 || name.rfind("NCCL_", 0) == 0 || name == "OMP_NUM_THREADS" ||
                           name == "PATH" || name == "LD_LIBRARY_PATH";
    if (forwarded) env.emplace_back(name, eq + 1);
  }
  return env;
}

std::string remote_command_line(const std::vector<std::string>& argv, const std::string& dir,
                                const std::vector<std::pair<std::string, std::string>>& env) {
  std::string line = "cd " + shell_quote(dir) + " && exec env";
  for (const auto& [name, value] : env) line += " " + shell_quote(name + "=" + value);
  for (const auto& arg : argv) line += " " + shell_quote(arg);
  return line;
}

}  // namespace dtrain

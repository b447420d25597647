// Fault injection for the tests reads lists of entries from the environment: "a,b,c".
#pragma once
#include <cstdlib>
#include <sstream>
#include <string>

namespace dtrain {

// Whether the comma-separated list in environment variable `name` holds `entry` exactly. Unset or
// empty, it costs one getenv.
inline bool env_list_contains(const char* name, const std::string& entry) {
  const char* list = std::getenv(name);
  if (!list || !*list) return false;
  std::istringstream entries(list);
  for (std::string e; std::getline(entries, e, ',');)
    if (e == entry) return true;
  return false;
}

}  // namespace dtrain

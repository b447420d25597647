// This host's name, as messages and rendezvous name it.
#pragma once
#include <unistd.h>

#include <string>

namespace dtrain {

// "?" when the kernel will not say.
inline std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "?";
}

}  // namespace dtrain

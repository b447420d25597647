#include "train/injected_overflow.h"

#include <cstdlib>
#include <string>

#include "common/env_list.h"

namespace dtrain {

bool overflow_injected(int64_t step) {
  static const char* rank = std::getenv("RANK");
  return env_list_contains("DTRAIN_INJECT_OVERFLOW", std::to_string(step) + ":" + (rank && *rank ? rank : "0"));
}

}  // namespace dtrain

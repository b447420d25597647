#include "train/injected_faults.h"

#include <cstdlib>
#include <string>

#include "common/env_list.h"

namespace dtrain {

namespace {
bool injected(const char* variable, int64_t step) {
  static const char* rank = std::getenv("RANK");
  return env_list_contains(variable, std::to_string(step) + ":" + (rank && *rank ? rank : "0"));
}
}  // namespace

bool overflow_injected(int64_t step) { return injected("DTRAIN_INJECT_OVERFLOW", step); }
bool replica_drift_injected(int64_t step) { return injected("DTRAIN_INJECT_REPLICA_DRIFT", step); }
bool save_failure_injected(int64_t step) { return injected("DTRAIN_INJECT_SAVE_FAILURE", step); }
bool slow_save_injected(int64_t step) { return injected("DTRAIN_INJECT_SLOW_SAVE", step); }
bool load_failure_injected(int64_t step) { return injected("DTRAIN_INJECT_LOAD_FAILURE", step); }
bool micro_batch_drop_injected(int64_t step) { return injected("DTRAIN_INJECT_DROP_MICRO_BATCH", step); }
bool tied_gradient_drop_injected(int64_t step) { return injected("DTRAIN_INJECT_DROP_TIED_GRADIENT", step); }
bool unaveraged_micro_batches_injected(int64_t step) { return injected("DTRAIN_INJECT_UNAVERAGED_MICRO_BATCHES", step); }

}  // namespace dtrain

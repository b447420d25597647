// A resolved config as the memory estimate reads it (tools/estimate/memory_layout.h), and the list of
// every config key that shapes a rank's memory with how the estimate treats it: a new parallelism or
// buffer adds keys, and the test that holds this list equal to the config's keys fails until the
// estimate says what they do.
#pragma once
#include <string>
#include <vector>

#include "tools/estimate/memory_layout.h"
#include "train/train_config.h"

namespace dtrain {

// `device_is_cpu`: the run computes on the CPU (the CPU build); `ranks_per_node`: ranks sharing one
// node's memory.
MemoryLayout estimate_layout(const TrainConfig& config, bool device_is_cpu, int ranks_per_node);

// How the estimate treats a key.
enum class KeyUse {
  Modelled,  // the formulas read it
  NoEffect,  // it changes no buffer's size (a tuning key, a name, a schedule's time)
  Refused,   // a value other than its default is not modelled: the estimate says "no estimate for" it
};

struct LayoutKey {
  std::string key;  // dotted, as config_defaults() names it
  KeyUse use;
};

// Every key of the sections that decide what a rank holds: model, parallel, zero_optimization,
// activation_checkpointing, bf16, fp16, data_types, the batch keys, optimizer.type,
// train.activation_checkpointing and train.freeze.
const std::vector<LayoutKey>& layout_keys();
// The config sections (and single keys) layout_keys() covers.
const std::vector<std::string>& layout_sections();

}  // namespace dtrain

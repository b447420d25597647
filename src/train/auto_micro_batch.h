// train_micro_batch_size_per_gpu "auto" that only memory can decide. Configs written for the Hugging
// Face Trainer give gradient_accumulation_steps and leave the micro-batch and the global batch
// "auto": the run then takes the largest power of two (up to TrainConfig::micro_batch_auto_cap)
// whose estimated peak (tools/estimate/memory_estimate.h) fits the memory of one rank, says so with
// the estimate behind it, and refuses only when not even 1 fits. A layout the estimate does not
// cover keeps the default of 8 where no batch key is given, and is refused where the accumulation
// is, as before.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/world.h"
#include "train/train_config.h"

namespace dtrain {

// The share of the machine's physical memory the ranks of one node may fill on the CPU build; the
// rest is the kernel's, the page cache's and other processes' (docs/decisions.md, "A micro-batch
// that memory decides").
constexpr double kCpuMemoryShare = 0.8;

struct MemoryBudget {
  double bytes = 0;  // what one rank may fill
  std::string from;  // "80% of this host's 23.2 GiB of physical memory, over 2 rank(s)"
};

// The budget a choice is made for: train.memory_budget when the config gives it, else `device`'s own
// memory (what the run and `dtrain estimate` each know of their device).
MemoryBudget configured_or(const TrainConfig& config, MemoryBudget device);

// One rank's budget on this machine: configured_or the GPU's memory on CUDA, or on the CPU build
// kCpuMemoryShare of the host's physical memory shared by `ranks_per_node` ranks.
MemoryBudget rank_memory_budget(const TrainConfig& config, const at::Device& device, int ranks_per_node);

struct MicroBatchChoice {
  int64_t micro_batch = 0;
  std::string line;  // "train_micro_batch_size_per_gpu auto: 8, the largest that fits: estimated ..."
};

// The micro-batch of a config whose micro_batch_auto_cap is set, for `budget`: a pure function of
// the config (estimated as estimate_layout(config, device_is_cpu, ranks_per_node) reads it). Throws
// ConfigError naming train_micro_batch_size_per_gpu when even 1 does not fit, or when the estimate
// does not cover the layout and the accumulation was given.
MicroBatchChoice choose_micro_batch(const TrainConfig& config, const MemoryBudget& budget, bool device_is_cpu, int ranks_per_node);

// Sets the micro-batch, and the global batch it makes with the accumulation, in `config` and its JSON.
void set_micro_batch(TrainConfig& config, int64_t micro_batch);

// choose_micro_batch's choice set into `config` when it leaves the micro-batch to memory; returns
// the line that says what was chosen, "" when the config fixes the micro-batch. Throws as
// choose_micro_batch does.
std::string apply_auto_micro_batch(TrainConfig& config, const MemoryBudget& budget, bool device_is_cpu, int ranks_per_node);

// The run's budget, into the config's JSON as train.memory_budget (rank 0's is the one its
// config.json keeps), and its choice when the config leaves the micro-batch to memory: rank 0
// decides for its own memory and every rank follows, logging the line into `setup_lines`.
void resolve_auto_micro_batch(World& world, TrainConfig& config, std::vector<std::string>& setup_lines);

}  // namespace dtrain

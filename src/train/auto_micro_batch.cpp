#include "train/auto_micro_batch.h"

#include <unistd.h>

#ifdef DTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "common/byte_words.h"
#include "tools/estimate/memory_estimate.h"
#include "train/estimate_layout.h"
#include "train/rank_agreement.h"

namespace dtrain {

namespace {

const std::string kKey = "train_micro_batch_size_per_gpu";

double physical_memory_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

}  // namespace

MemoryBudget configured_or(const TrainConfig& c, MemoryBudget device) {
  return c.memory_budget > 0 ? MemoryBudget{c.memory_budget, "train.memory_budget"} : device;
}

MemoryBudget rank_memory_budget(const TrainConfig& c, const at::Device& device, int ranks_per_node) {
#ifdef DTRAIN_CUDA
  if (device.is_cuda()) {
    const double total = double(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
    return configured_or(c, {total, "the memory of " + device.str()});
  }
#endif
  const double physical = physical_memory_bytes();
  return configured_or(c, {kCpuMemoryShare * physical / ranks_per_node, std::to_string(int(kCpuMemoryShare * 100)) + "% of this host's " +
                                                                            byte_words(physical) + " of physical memory, over " +
                                                                            std::to_string(ranks_per_node) + " rank(s)"});
}

MicroBatchChoice choose_micro_batch(const TrainConfig& c, const MemoryBudget& budget, bool device_is_cpu, int ranks_per_node) {
  MemoryLayout layout = estimate_layout(c, device_is_cpu, ranks_per_node);
  auto estimate_for = [&](int64_t micro_batch) {
    layout.micro_batch = micro_batch;
    return estimate_memory(layout);
  };
  const std::string of_budget = " of the " + byte_words(budget.bytes) + " budget per rank (" + budget.from + ")";
  const MemoryEstimate one = estimate_for(1);
  if (!one.covered()) {
    if (c.micro_batch_auto_cap == TrainConfig::kAutoMicroBatchCap)
      throw ConfigError(kKey + " \"auto\" is decided by the memory estimate, which has " + one.no_estimate + ": set " + kKey +
                        " (or train_batch_size)");
    return {c.micro_batch, kKey + " auto: " + std::to_string(c.micro_batch) + ", the default, as memory cannot decide: " + one.no_estimate};
  }
  const RankEstimate& smallest = one.most_loaded();
  if (smallest.device_bytes() > budget.bytes)
    throw ConfigError(kKey + " \"auto\": not even a micro-batch of 1 fits: it needs an estimated " + byte_words(smallest.device_bytes()) +
                      of_budget + ", the largest term " + smallest.largest().name + " (" + byte_words(smallest.largest().bytes) +
                      "); shard the state (zero_optimization.stage), checkpoint activations (train.activation_checkpointing), "
                      "split the model (parallel.tp, parallel.pp) or give train.memory_budget");
  int64_t chosen = 1;
  double chosen_bytes = smallest.device_bytes();
  std::string next = "; " + std::to_string(c.micro_batch_auto_cap) + " is the most auto takes" +
                     (c.micro_batch_auto_cap == TrainConfig::kAutoMicroBatchCap ? "" : " without a batch key (set gradient_accumulation_steps for more)");
  for (int64_t m = 2; m <= c.micro_batch_auto_cap; m *= 2) {
    const double bytes = estimate_for(m).most_loaded().device_bytes();
    if (bytes > budget.bytes) {
      next = "; " + std::to_string(m) + " would need " + byte_words(bytes);
      break;
    }
    chosen = m;
    chosen_bytes = bytes;
  }
  return {chosen, kKey + " auto: " + std::to_string(chosen) + ", the largest power of two that fits: estimated " + byte_words(chosen_bytes) +
                      of_budget + next};
}

void set_micro_batch(TrainConfig& c, int64_t micro_batch) {
  c.micro_batch = micro_batch;
  c.global_batch = micro_batch * c.accumulation * c.dp;
  c.json[kKey] = micro_batch;
  c.json["train_batch_size"] = c.global_batch;
}

std::string apply_auto_micro_batch(TrainConfig& c, const MemoryBudget& budget, bool device_is_cpu, int ranks_per_node) {
  if (c.micro_batch_auto_cap == 0) return "";
  const MicroBatchChoice choice = choose_micro_batch(c, budget, device_is_cpu, ranks_per_node);
  set_micro_batch(c, choice.micro_batch);
  return choice.line;
}

void resolve_auto_micro_batch(World& world, TrainConfig& c, std::vector<std::string>& setup_lines) {
  const int ranks_per_node = world.env().local_world_size;
  const MemoryBudget budget = rank_memory_budget(c, world.device(), ranks_per_node);
  c.json["train"]["memory_budget"] = int64_t(budget.bytes);
  if (c.micro_batch_auto_cap == 0) return;
  std::string line;
  const std::string chosen = agree(world, "trainer/auto_micro_batch", [&] {
    const MicroBatchChoice choice = choose_micro_batch(c, budget, world.device().is_cpu(), ranks_per_node);
    line = choice.line;
    return std::to_string(choice.micro_batch);
  });
  set_micro_batch(c, std::stoll(chosen));
  setup_lines.push_back(line.empty() ? kKey + " auto: " + chosen + ", as rank 0 chose for its memory" : line);
}

}  // namespace dtrain

// ZeRO-Offload and ZeRO-Infinity (zero_optimization.offload_optimizer, offload_param): where the
// model states of model_states.h go, and the buffers offloading adds (Ren et al. 2021, "ZeRO-Offload:
// Democratizing Billion-Scale Model Training", §4: the optimizer state and its update on the host,
// the accelerator keeping parameters and gradients; Rajbhandari et al. 2021, "ZeRO-Infinity", §5:
// state and parameters on NVMe, streamed through buffers). What dtrain allocates for them:
// parallel/zero/host_offload_optimizer.h, nvme_optimizer.h, fully_sharded_parameters.h.
#pragma once
#include <vector>

#include "tools/estimate/memory_estimate.h"
#include "tools/estimate/model_states.h"

namespace dtrain {

// Where the optimizer state is: a file with offload_optimizer nvme, host memory with cpu on a GPU,
// else the device (on the CPU build the device is host memory already).
MemoryPlace optimizer_state_place(const MemoryLayout& layout);
// Where ZeRO-3's parameter shard is, by offload_param alike.
MemoryPlace parameter_shard_place(const MemoryLayout& layout);

// What offloading keeps for the whole run: NVMe's streaming buffers, and on a GPU the host staging
// buffers the update reads the gradients (and parameters) from. Empty without offload.
std::vector<MemoryTerm> offload_buffer_terms(const MemoryLayout& layout, const ParameterCounts& counts);

// ZeRO-3's pieces of block units on their way to a gather from an offloaded shard, while block `i`
// runs its backward: the piece of the block before it being gathered and, from NVMe, the one before
// that being read ahead. Empty when the shard is on the device.
std::vector<MemoryTerm> offloaded_piece_terms(const MemoryLayout& layout, const ParameterCounts& counts, int i);

}  // namespace dtrain

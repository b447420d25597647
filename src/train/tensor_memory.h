// What a rank's tensors take, measured: on the CPU a counting allocator in front of ATen's own
// (every CPU tensor's storage is allocated through c10::GetCPUAllocator()), which keeps the bytes
// alive now and the most alive at once since the last reset, exactly and the same from run to run;
// on CUDA the caching allocator's own statistics (peak allocated, the tensors' bytes, and peak
// reserved, what it holds from the driver). The estimate (tools/estimate) is checked against these
// bytes: peak RSS adds what no tensor holds (the process, LibTorch's code, malloc's slack). What is
// alive at a peak, allocation by allocation: tensor_memory_trace.h.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace dtrain {

// Puts the counting allocator in front of the CPU allocator, once per process (later calls do
// nothing). Tensors allocated before keep their own deleter and are never counted, so call it before
// anything the measurement should see is built.
void track_cpu_tensor_memory();
bool cpu_tensor_memory_tracked();

// From now on the tracked CPU tensors' large blocks come from a HostBlockCache (host_block_cache.h)
// instead of malloc; host_memory.h decides when. Returns false where nothing is tracked (then
// nothing changes).
bool cache_large_cpu_tensor_blocks();
// Unmaps the cached blocks and restarts the cache's high-water mark: the end of setting up.
void release_cached_cpu_tensor_blocks();

struct TensorMemory {
  int64_t live = 0;      // allocated now
  int64_t peak = 0;      // the most allocated at once since the last reset_peak
  int64_t reserved = 0;  // CUDA: the caching allocator's peak reserved bytes since the reset; CPU: 0
};

// The memory of `device`'s tensors (CPU: 0 unless tracked).
TensorMemory tensor_memory(const at::Device& device);
// Starts a new peak from what is allocated now.
void reset_tensor_memory_peak(const at::Device& device);

}  // namespace dtrain

#include "train/tensor_memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <mutex>

#include "train/host_block_cache.h"
#include "train/tensor_memory_trace.h"

#ifdef DTRAIN_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace dtrain {

namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

// Each block carries its size in a header before the tensor's bytes, and the length it is mapped with
// when it came from the block cache (0 when from malloc), so freeing needs no lookup. 64 bytes keep
// the tensor at the alignment c10::alloc_cpu gives (64).
constexpr size_t kHeader = 64;

// Never destroyed: tensors that static destructors free at exit still give their blocks back to it.
HostBlockCache& block_cache = *new HostBlockCache;
std::atomic<bool> caching{false};  // cache_large_cpu_tensor_blocks() was called

// Whether allocations are also traced (tensor_memory_trace.h), decided when the allocator is installed.
bool traced = false;

int64_t count(int64_t bytes) {
  const int64_t now = live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return now;
}

void free_counted(void* data) {
  if (!data) return;
  if (traced) tensor_memory_trace::freed(data);
  char* block = static_cast<char*>(data) - kHeader;
  const int64_t* header = reinterpret_cast<const int64_t*>(block);
  live_bytes.fetch_sub(header[0], std::memory_order_relaxed);
  if (header[1] > 0)
    block_cache.give(block, size_t(header[1]));
  else
    c10::free_cpu(block);
}

// ATen's default CPU allocation (c10::alloc_cpu: aligned; zero bytes give a null pointer), counted.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &free_counted, c10::Device(c10::DeviceType::CPU)};
    const size_t mapped = caching.load(std::memory_order_relaxed) && bytes + kHeader >= HostBlockCache::kMinBytes
                              ? HostBlockCache::mapped_length(bytes + kHeader)
                              : 0;
    char* block = mapped ? block_cache.take(mapped) : static_cast<char*>(c10::alloc_cpu(bytes + kHeader));
    int64_t* header = reinterpret_cast<int64_t*>(block);
    header[0] = int64_t(bytes);
    header[1] = int64_t(mapped);
    const int64_t live = count(int64_t(bytes));
    void* data = block + kHeader;
    if (traced) tensor_memory_trace::allocated(data, int64_t(bytes), live);
    return {data, data, &free_counted, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }
  void copy_data(void* dest, const void* src, size_t bytes) const override { default_copy_data(dest, src, bytes); }
};

std::once_flag installed;
std::atomic<bool> tracking{false};

}  // namespace

void track_cpu_tensor_memory() {
  std::call_once(installed, [] {
    traced = tensor_memory_trace::enabled();
    static CountingCpuAllocator allocator;
    // A priority above the default allocator's (0), which registers itself when c10 loads.
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    tracking = c10::GetCPUAllocator() == &allocator;
  });
}

bool cpu_tensor_memory_tracked() { return tracking; }

bool cache_large_cpu_tensor_blocks() {
  caching = tracking.load();
  return caching;
}

void release_cached_cpu_tensor_blocks() { block_cache.release(); }

TensorMemory tensor_memory(const at::Device& device) {
#ifdef DTRAIN_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto all = size_t(c10::CachingAllocator::StatType::AGGREGATE);
    return {stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak, stats.reserved_bytes[all].peak};
  }
#endif
  if (!device.is_cpu() || !tracking) return {};
  return {live_bytes.load(), peak_bytes.load(), 0};
}

void reset_tensor_memory_peak(const at::Device& device) {
#ifdef DTRAIN_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return;
  }
#endif
  peak_bytes = live_bytes.load();
  if (traced) tensor_memory_trace::reset(peak_bytes);
}

}  // namespace dtrain

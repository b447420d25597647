#include "train/tensor_memory.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#ifdef DTRAIN_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace dtrain {

namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

// Each block carries its size in a header before the tensor's bytes, so freeing needs no lookup and
// no lock. 64 bytes keep the tensor at the alignment c10::alloc_cpu gives (64).
constexpr size_t kHeader = 64;

// DTRAIN_PEAK_ALLOCATIONS=PREFIX: a debugging aid for the memory estimate. Every allocation is kept
// in a map (under a lock, so slow), the sizes of those alive at the latest peak are copied at each new
// one, and at exit PREFIX.rank<RANK> lists them, largest first: what is alive at the measured peak.
class PeakAllocations {
 public:
  static PeakAllocations* get() {
    static PeakAllocations* dump = [] {
      const char* prefix = std::getenv("DTRAIN_PEAK_ALLOCATIONS");
      const char* rank = std::getenv("RANK");
      return prefix && *prefix ? new PeakAllocations(std::string(prefix) + ".rank" + (rank ? rank : "0")) : nullptr;
    }();
    return dump;
  }
  void allocated(void* block, int64_t bytes, int64_t now, bool new_peak) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_[block] = bytes;
    if (!new_peak) return;
    at_peak_.clear();
    for (const auto& [b, size] : live_) at_peak_.push_back(size);
    peak_ = now;
  }
  void freed(void* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(block);
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    at_peak_.clear();
    peak_ = 0;
    for (const auto& [b, size] : live_) {
      at_peak_.push_back(size);
      peak_ += size;
    }
  }
  void write() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::sort(at_peak_.rbegin(), at_peak_.rend());
    std::ofstream out(path_);
    out << "peak " << peak_ << "\n";
    for (int64_t size : at_peak_) out << size << "\n";
  }

 private:
  explicit PeakAllocations(std::string path) : path_(std::move(path)) { std::atexit([] { get()->write(); }); }
  std::string path_;
  std::mutex mutex_;
  std::map<void*, int64_t> live_;
  std::vector<int64_t> at_peak_;
  int64_t peak_ = 0;
};

void count(void* block, int64_t bytes) {
  const int64_t now = live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  bool new_peak = false;
  while (now > peak && !(new_peak = peak_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed))) {
  }
  if (PeakAllocations* dump = PeakAllocations::get()) dump->allocated(block, bytes, now, new_peak);
}

void free_counted(void* data) {
  if (!data) return;
  char* block = static_cast<char*>(data) - kHeader;
  if (PeakAllocations* dump = PeakAllocations::get()) dump->freed(block);
  live_bytes.fetch_sub(*reinterpret_cast<const int64_t*>(block), std::memory_order_relaxed);
  c10::free_cpu(block);
}

// ATen's default CPU allocation (c10::alloc_cpu: aligned; zero bytes give a null pointer), counted.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &free_counted, c10::Device(c10::DeviceType::CPU)};
    char* block = static_cast<char*>(c10::alloc_cpu(bytes + kHeader));
    *reinterpret_cast<int64_t*>(block) = int64_t(bytes);
    count(block, int64_t(bytes));
    void* data = block + kHeader;
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
    static CountingCpuAllocator allocator;
    // A priority above the default allocator's (0), which registers itself when c10 loads.
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    tracking = c10::GetCPUAllocator() == &allocator;
  });
}

bool cpu_tensor_memory_tracked() { return tracking; }

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
  if (PeakAllocations* dump = PeakAllocations::get()) dump->reset();
}

}  // namespace dtrain

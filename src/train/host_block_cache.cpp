#include "train/host_block_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <new>

namespace dtrain {

HostBlockCache::~HostBlockCache() { release(); }

size_t HostBlockCache::mapped_length(size_t bytes) {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

char* HostBlockCache::take(size_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_.live += length;
  if (auto same = by_length_.find(length); same != by_length_.end()) {
    // The most recently freed of that length: its pages are the likeliest still in the CPU's caches.
    const auto it = same->second.back();
    same->second.pop_back();
    if (same->second.empty()) by_length_.erase(same);
    char* block = it->block;
    freed_.erase(it);
    bytes_.cached -= length;
    return block;
  }
  bytes_.high_water = std::max(bytes_.high_water, bytes_.live);
  if (bytes_.cached > 0 && bytes_.live + bytes_.cached > bytes_.high_water) {
    char* block = reshape_closest(length);
    while (bytes_.cached > 0 && bytes_.live + bytes_.cached > bytes_.high_water) unmap_oldest();
    if (block) return block;
  }
  void* block = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) {
    bytes_.live -= length;
    throw std::bad_alloc();
  }
  return static_cast<char*>(block);
}

void HostBlockCache::give(char* block, size_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_.live -= length;
  bytes_.cached += length;
  freed_.push_back({block, length});
  by_length_[length].push_back(std::prev(freed_.end()));
}

// A cached block made `length` long: the shortest of those at least that long (its pages stay
// resident, the tail is unmapped), else the longest (grown). Either way the pages it had are not
// faulted in again, as a new mapping's would be.
char* HostBlockCache::reshape_closest(size_t length) {
  auto it = by_length_.lower_bound(length);
  if (it == by_length_.end()) it = std::prev(it);
  const auto cached = it->second.back();
  it->second.pop_back();
  const Cached c = *cached;
  freed_.erase(cached);
  if (it->second.empty()) by_length_.erase(it);
  bytes_.cached -= c.length;
  void* block = ::mremap(c.block, c.length, length, MREMAP_MAYMOVE);
  if (block == MAP_FAILED) {
    ::munmap(c.block, c.length);
    return nullptr;
  }
  return static_cast<char*>(block);
}

// The oldest freed block overall is also the oldest of its length: the front of its list.
void HostBlockCache::unmap_oldest() {
  const Cached oldest = freed_.front();
  auto same = by_length_.find(oldest.length);
  same->second.erase(same->second.begin());
  if (same->second.empty()) by_length_.erase(same);
  freed_.pop_front();
  bytes_.cached -= oldest.length;
  ::munmap(oldest.block, oldest.length);
}

void HostBlockCache::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!freed_.empty()) unmap_oldest();
  by_length_.clear();
  bytes_.high_water = bytes_.live;
}

HostBlockCache::Bytes HostBlockCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace dtrain

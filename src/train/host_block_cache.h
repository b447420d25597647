// Large tensor blocks of the CPU build, mapped on their own and reused by exact length. A training
// step allocates and frees the same large buffers every step. Carved from glibc's heap (which
// keep_freed_host_memory() tells to keep what it frees), each step's blocks land in different holes of
// what the last step freed and the heap grows around them: peak RSS 8-44% over the tensors' peak on
// GPT-2 124M. Handed back to the kernel when freed, every step faults its pages in and the kernel
// zeroes them again (15 times the page faults, a quarter of the speed). The cache keeps freed blocks
// mapped and gives a request a cached block of its exact length (the same shapes recur every step),
// and it never holds more than the most that was ever live at once. A request it cannot serve maps a
// new block while that bound allows; past it, the closest cached block is cut or grown to the length
// (mremap: its pages stay resident, so they are not faulted in again) and the blocks freed longest
// ago are unmapped until what is live and cached fits the bound. So resident memory follows the
// tensors' peak, and the steps run as fast as with the heap.
// docs/decisions.md, "Large tensor blocks cached by length", has the measurements.
#pragma once
#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <vector>

namespace dtrain {

class HostBlockCache {
 public:
  // Blocks of this many bytes and more are cached; smaller ones stay with malloc, which reuses them well.
  static constexpr size_t kMinBytes = 256 << 10;

  struct Bytes {
    size_t live = 0;        // in blocks handed out
    size_t cached = 0;      // in freed blocks kept mapped
    size_t high_water = 0;  // the most ever live at once (since the last release)
  };

  ~HostBlockCache();

  // The length a block of `bytes` is mapped with (whole pages).
  static size_t mapped_length(size_t bytes);
  // A block of `length` bytes (a mapped_length), page-aligned, from the cache or newly mapped.
  char* take(size_t length);
  // Keeps a block from take() for reuse.
  void give(char* block, size_t length);
  // Unmaps every cached block and starts a new high-water mark from what is live now: for the end of
  // setting up, whose one-time buffers should not raise what the steps may keep.
  void release();
  Bytes bytes() const;

 private:
  struct Cached {
    char* block;
    size_t length;
  };
  char* reshape_closest(size_t length);
  void unmap_oldest();

  mutable std::mutex mutex_;
  std::list<Cached> freed_;  // front: freed longest ago
  // Per length, the blocks of freed_ in the order they were freed.
  std::map<size_t, std::vector<std::list<Cached>::iterator>> by_length_;
  Bytes bytes_;
};

}  // namespace dtrain

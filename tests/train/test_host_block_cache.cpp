// The CPU build's cache of large tensor blocks (train/host_block_cache.h): a freed block comes back
// for a request of its length, and what is live and cached together never exceeds the most that was
// live at once, so resident memory follows the tensors' peak.
#include <gtest/gtest.h>

#include <cstring>

#include "train/host_block_cache.h"

namespace dtrain {
namespace {

constexpr size_t kMiB = 1 << 20;

TEST(HostBlockCache, AFreedBlockServesTheNextRequestOfItsLength) {
  HostBlockCache cache;
  char* first = cache.take(kMiB);
  std::memset(first, 1, kMiB);
  cache.give(first, kMiB);
  EXPECT_EQ(cache.bytes().cached, kMiB);
  EXPECT_EQ(cache.take(kMiB), first);
  EXPECT_EQ(cache.bytes().live, kMiB);
  EXPECT_EQ(cache.bytes().cached, 0u);
  cache.give(first, kMiB);
}

// A length nothing cached has, where mapping it anew would keep more than was ever live: the
// shortest cached block at least as long is cut to it in place, its pages still resident.
TEST(HostBlockCache, AMissCutsTheClosestLongerBlockInsteadOfMappingAnew) {
  HostBlockCache cache;
  char* a = cache.take(2 * kMiB);
  char* b = cache.take(kMiB);
  cache.give(a, 2 * kMiB);
  EXPECT_EQ(cache.take(kMiB / 2), a);
  const HostBlockCache::Bytes now = cache.bytes();
  EXPECT_EQ(now.live, kMiB + kMiB / 2);
  EXPECT_EQ(now.cached, 0u);
  cache.give(a, kMiB / 2);
  cache.give(b, kMiB);
}

// Without a block as long, the longest cached one grows to it, and then the blocks freed longest ago
// are unmapped until what is live and cached fits the most that was ever live at once.
TEST(HostBlockCache, KeepsNoMoreThanWasLiveAtOnce) {
  HostBlockCache cache;
  char* a = cache.take(kMiB);
  char* b = cache.take(2 * kMiB);
  char* c = cache.take(kMiB);
  EXPECT_EQ(cache.bytes().high_water, 4 * kMiB);
  cache.give(a, kMiB);
  cache.give(c, kMiB);
  char* d = cache.take(3 * kMiB);  // c grown; a unmapped
  std::memset(d, 1, 3 * kMiB);
  const HostBlockCache::Bytes now = cache.bytes();
  EXPECT_EQ(now.high_water, 5 * kMiB);
  EXPECT_EQ(now.live, 5 * kMiB);
  EXPECT_EQ(now.cached, 0u);
  cache.give(b, 2 * kMiB);
  cache.give(d, 3 * kMiB);
}

TEST(HostBlockCache, ReleaseUnmapsWhatIsCachedAndRestartsTheHighWaterMark) {
  HostBlockCache cache;
  char* big = cache.take(8 * kMiB);
  char* small = cache.take(kMiB);
  cache.give(big, 8 * kMiB);
  cache.release();
  EXPECT_EQ(cache.bytes().cached, 0u);
  EXPECT_EQ(cache.bytes().high_water, kMiB);
  // What setting up once held no longer lets the cache keep a block beside a new one: the freed block is grown into it.
  cache.give(small, kMiB);
  char* other = cache.take(2 * kMiB);
  EXPECT_EQ(cache.bytes().cached, 0u);
  cache.give(other, 2 * kMiB);
}

TEST(HostBlockCache, MapsWholePages) {
  EXPECT_EQ(HostBlockCache::mapped_length(HostBlockCache::kMinBytes + 1) % 4096, 0u);
  EXPECT_GE(HostBlockCache::mapped_length(HostBlockCache::kMinBytes + 1), HostBlockCache::kMinBytes + 1);
}

}  // namespace
}  // namespace dtrain

// 64-bit hashes with fixed definitions, so that what is derived from them (a shuffle order, a
// parameter's initial values, a shared-memory name) is the same on every platform and build,
// which std::hash does not promise. Header-only so that every module can use them.
#pragma once
#include <cstdint>
#include <string_view>

namespace dtrain {

// splitmix64's finalizer: a bijective 64-bit mix in which every input bit affects every output bit.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a of the bytes of `text`.
inline uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace dtrain

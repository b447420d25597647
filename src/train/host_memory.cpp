#include "train/host_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "train/host_block_cache.h"
#include "train/tensor_memory.h"

namespace dtrain {

namespace {

constexpr int kMaxMmapThreshold = 32 << 20;  // glibc refuses more (HEAP_MAX_SIZE / 2 on 64-bit)
constexpr int kSetupMmapThreshold = 1 << 20;
bool keeping = false;     // keep_freed_host_memory() set glibc up
bool setting_up = false;  // map_large_blocks_while_setting_up() until release_freed_host_memory()

}  // namespace

std::string keep_freed_host_memory() {
  if (const char* v = std::getenv("DTRAIN_GLIBC_MALLOC_DEFAULTS"); v && std::strcmp(v, "1") == 0)
    return "host memory: glibc malloc as it ships (DTRAIN_GLIBC_MALLOC_DEFAULTS=1)";
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "MALLOC_", 7) == 0) return "host memory: glibc malloc as the MALLOC_* environment sets it";
  const bool ok =
      mallopt(M_MMAP_THRESHOLD, kMaxMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1 && mallopt(M_TOP_PAD, 256 << 20) == 1;
  keeping = ok;
  if (!ok) return "host memory: glibc malloc refused the settings that keep freed memory; it runs as it ships";
  const std::string kept = "host memory: glibc malloc keeps freed memory for reuse (no trimming, heap blocks up to 32 MiB)";
  if (const char* v = std::getenv("DTRAIN_HOST_BLOCK_CACHE"); v && std::strcmp(v, "0") == 0)
    return kept + "; tensor blocks from the heap too (DTRAIN_HOST_BLOCK_CACHE=0)";
  if (!cache_large_cpu_tensor_blocks()) return kept;
  return kept + "; tensor blocks of " + std::to_string(HostBlockCache::kMinBytes >> 10) +
         " KiB and more mapped on their own and reused by length, never more kept than was live at once";
}

namespace {

// This process's resident bytes now (/proc/self/statm), 0 where it cannot be read.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * int64_t(::sysconf(_SC_PAGESIZE));
}

}  // namespace

void map_large_blocks_while_setting_up() { setting_up = keeping && mallopt(M_MMAP_THRESHOLD, kSetupMmapThreshold) == 1; }

int64_t release_freed_host_memory() {
  if (setting_up) mallopt(M_MMAP_THRESHOLD, kMaxMmapThreshold);
  setting_up = false;
  const int64_t before = resident_bytes();
  release_cached_cpu_tensor_blocks();
  malloc_trim(0);
  return std::max<int64_t>(0, before - resident_bytes());
}

bool reset_peak_resident() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  return bool(clear_refs << "5" << std::flush);
}

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
  return 0;
}

}  // namespace dtrain

#include "train/tensor_memory_trace.h"

#include <cxxabi.h>
#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dtrain::tensor_memory_trace {

namespace {

constexpr int kFrames = 32;
// The frames inside the allocator and this trace, not worth printing.
constexpr int kSkipped = 4;

struct Allocation {
  int64_t bytes = 0;
  std::array<void*, kFrames> frames{};
  int depth = 0;
};

struct Trace {
  std::mutex mutex;
  std::string path;
  std::unordered_map<void*, Allocation> live;
  std::vector<Allocation> at_peak;
  int64_t peak = 0;
  int window = 0;
};

Trace* trace() {
  static Trace* t = [] () -> Trace* {
    const char* prefix = std::getenv("DTRAIN_TENSOR_MEMORY_PEAKS");
    if (!prefix || !*prefix) return nullptr;
    auto* made = new Trace;  // never freed: allocations may be freed during static destruction
    made->path = std::string(prefix) + "." + std::to_string(::getpid()) + ".txt";
    std::atexit([] { reset(0); });
    return made;
  }();
  return t;
}

std::string frame_text(void* frame) {
  char** symbols = backtrace_symbols(&frame, 1);
  std::string text = symbols ? symbols[0] : "?";
  std::free(symbols);
  // "lib(mangled+0x1f) [addr]": the demangled name, else the raw line.
  const size_t open = text.find('('), plus = text.find('+', open);
  if (open == std::string::npos || plus == std::string::npos || plus == open + 1) return text;
  int status = 0;
  char* name = abi::__cxa_demangle(text.substr(open + 1, plus - open - 1).c_str(), nullptr, nullptr, &status);
  if (status != 0 || !name) return text;
  std::string out(name);
  std::free(name);
  return out.size() > 160 ? out.substr(0, 160) + "…" : out;
}

void write_peak(Trace& t) {
  if (t.at_peak.empty()) return;
  std::vector<Allocation> sorted = t.at_peak;
  std::sort(sorted.begin(), sorted.end(), [](const Allocation& a, const Allocation& b) { return a.bytes > b.bytes; });
  std::ofstream out(t.path, std::ios::app);
  out << "window " << t.window << ": peak " << t.peak << " bytes in " << sorted.size() << " allocations\n";
  for (const Allocation& a : sorted) {
    out << a.bytes << " bytes\n";
    for (int f = kSkipped; f < a.depth; ++f) out << "    " << frame_text(a.frames[size_t(f)]) << "\n";
  }
}

}  // namespace

bool enabled() { return trace() != nullptr; }

void allocated(void* data, int64_t bytes, int64_t live) {
  Trace* t = trace();
  Allocation a;
  a.bytes = bytes;
  a.depth = backtrace(a.frames.data(), kFrames);
  std::lock_guard<std::mutex> lock(t->mutex);
  t->live[data] = a;
  if (live <= t->peak) return;
  t->peak = live;
  t->at_peak.clear();
  for (const auto& [_, alive] : t->live) t->at_peak.push_back(alive);
}

void freed(void* data) {
  Trace* t = trace();
  std::lock_guard<std::mutex> lock(t->mutex);
  t->live.erase(data);
}

void reset(int64_t live) {
  Trace* t = trace();
  if (!t) return;
  std::lock_guard<std::mutex> lock(t->mutex);
  write_peak(*t);
  ++t->window;
  t->peak = live;
  t->at_peak.clear();
}

}  // namespace dtrain::tensor_memory_trace

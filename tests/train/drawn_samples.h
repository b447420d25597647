// What the ranks of a run drew, read back from the sample log (data/sample_log.h: DTRAIN_LOG_SAMPLES=
// PREFIX makes each rank append "epoch sample..." per micro-batch to PREFIX.rank<RANK>).
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>

namespace dtrain::test {

// (epoch, sample) -> how many times the ranks of every start logged under `prefix` drew it.
inline std::map<std::pair<int64_t, int64_t>, int> drawn(const std::string& prefix) {
  namespace fs = std::filesystem;
  std::map<std::pair<int64_t, int64_t>, int> counts;
  const fs::path parent = fs::path(prefix).parent_path();
  const std::string stem = fs::path(prefix).filename().string() + ".rank";
  for (const auto& e : fs::directory_iterator(parent)) {
    if (e.path().filename().string().rfind(stem, 0) != 0) continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      int64_t epoch = 0, sample = 0;
      fields >> epoch;
      while (fields >> sample) ++counts[{epoch, sample}];
    }
  }
  return counts;
}

inline int total(const std::map<std::pair<int64_t, int64_t>, int>& counts) {
  int n = 0;
  for (const auto& [key, count] : counts) n += count;
  return n;
}

}  // namespace dtrain::test

// `dtrain estimate`'s output: the estimate per rank as a table of its terms, the totals per rank and
// per node, and the verdict against the device memory (fits or not, by how much, the biggest term);
// or the same as one JSON object.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

#include "tools/estimate/memory_estimate.h"

namespace dtrain {

// Where the estimate runs: how many ranks, on how many nodes, with how much memory each.
struct EstimateTarget {
  int world_size = 1;
  int nodes = 1;
  double device_memory = 0;  // bytes per rank
  std::string device_memory_from;  // "--gpu-mem", or how the CPU build's share was taken
  bool gpu = false;
  int ranks_per_node() const { return world_size / nodes; }
};

// `layout_line` describes the config's model and layout in a line.
std::string estimate_table(const MemoryEstimate& estimate, const EstimateTarget& target, const std::string& layout_line);

// Every term in bytes; `total_bytes` is the most loaded rank's device total.
nlohmann::json estimate_json(const MemoryEstimate& estimate, const EstimateTarget& target, const std::string& layout_line);

}  // namespace dtrain

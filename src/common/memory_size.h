// A memory size as people write it: "80GiB", "80 GB", "24G", "81920MiB" or a plain byte count —
// binary units for KiB..TiB and the single letters, decimal ones for kB..TB. Read by
// `dtrain estimate --gpu-mem` and the config's train.memory_budget.
#pragma once
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// The bytes `text` names, or nullopt when it names no positive size.
inline std::optional<double> parse_memory_size(const std::string& text) {
  size_t end = 0;
  double value = -1;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(std::min(end, text.size()));
  unit.erase(0, unit.find_first_not_of(' '));
  const std::vector<std::pair<std::string, double>> units = {
      {"", 1},          {"B", 1},          {"K", 1024.0},     {"KiB", 1024.0},   {"kB", 1e3},      {"KB", 1e3},
      {"M", 1 << 20},   {"MiB", 1 << 20},  {"MB", 1e6},       {"G", 1 << 30},    {"GiB", 1 << 30}, {"GB", 1e9},
      {"T", 1024.0 * (1 << 30)}, {"TiB", 1024.0 * (1 << 30)}, {"TB", 1e12}};
  for (const auto& [name, scale] : units)
    if (end > 0 && unit == name && std::isfinite(value) && value > 0) return value * scale;
  return std::nullopt;
}

}  // namespace dtrain

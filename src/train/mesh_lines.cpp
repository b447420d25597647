#include "train/mesh_lines.h"

#include <algorithm>

#include "comm/device_mesh.h"

namespace dtrain {

namespace {

constexpr size_t kListed = 8;  // groups of a kind, and ranks of a group, listed in full

std::string joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : separator) + p;
  return s;
}

// "[0,2]", or past kListed ranks "[0,2,4,...,62] (32 ranks)".
std::string group_text(const std::vector<int>& ranks) {
  std::vector<std::string> shown;
  const bool cut = ranks.size() > kListed;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (cut && i == 3) {
      shown.push_back("...");
      i = ranks.size() - 1;
    }
    shown.push_back(std::to_string(ranks[i]));
  }
  return "[" + joined(shown, ",") + "]" + (cut ? " (" + std::to_string(ranks.size()) + " ranks)" : "");
}

// "tp groups: [0,1] [2,3]", or past kListed groups "... (and 12 more)".
std::string kind_text(const MeshGroups& kind) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(kind.groups.size(), kListed); ++i) shown.push_back(group_text(kind.groups[i]));
  if (kind.groups.size() > kListed) shown.push_back("(and " + std::to_string(kind.groups.size() - kListed) + " more)");
  return kind.name + " groups: " + joined(shown, " ");
}

}  // namespace

std::vector<std::string> mesh_lines(const ParallelDims& dims) {
  std::vector<MeshDim> layout;
  std::vector<std::string> split, whole;
  for (const auto& [name, size] : dims.mesh_dims()) {
    layout.push_back({name, size});
    if (size > 1) split.push_back(name + " " + std::to_string(size));
    else whole.push_back(name);
  }
  const std::string ones = "(" + joined(whole, ", ") + " 1)";
  if (split.empty()) return {"mesh: 1 rank " + ones};
  std::vector<std::string> lines{"mesh: " + joined(split, " x ") + (whole.empty() ? "" : " " + ones)};
  std::vector<std::vector<std::vector<int>>> listed;
  std::vector<std::string> kinds;
  for (const MeshGroups& kind : mesh_group_plan(layout)) {
    if (kind.groups.front().size() < 2 || std::find(listed.begin(), listed.end(), kind.groups) != listed.end()) continue;
    listed.push_back(kind.groups);
    kinds.push_back(kind_text(kind));
  }
  lines.push_back(joined(kinds, "; "));
  return lines;
}

}  // namespace dtrain

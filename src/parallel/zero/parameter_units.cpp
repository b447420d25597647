#include "parallel/zero/parameter_units.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {

ParameterParts::ParameterParts(const std::vector<ForwardPart>& parts) {
  for (const ForwardPart& part : parts) {
    for (const auto& item : part.parameters) part_[item.first] = part.index;
    end_ = std::max(end_, part.index + 1);
  }
}

int ParameterParts::of(const std::string& name) const {
  const auto it = part_.find(name);
  if (it == part_.end()) throw std::invalid_argument("parameter '" + name + "' belongs to no part of the model's forward pass");
  return it->second;
}

bool is_one_of(const at::Tensor& t, const std::vector<at::Tensor>& list) {
  return std::any_of(list.begin(), list.end(), [&](const at::Tensor& x) { return x.is_same(t); });
}

std::vector<std::pair<std::string, at::Tensor>> group_matmul_weights(const std::vector<std::pair<std::string, at::Tensor>>& named,
                                                                    const ParameterParts& parts,
                                                                    const std::vector<at::Tensor>& matmul_only) {
  std::vector<std::pair<std::string, at::Tensor>> ordered(named.begin(), named.end());
  for (auto run = ordered.begin(); run != ordered.end();) {
    const int part = parts.of(run->first);
    const auto end = std::find_if(run, ordered.end(), [&](const auto& p) { return parts.of(p.first) != part; });
    std::stable_partition(run, end, [&](const auto& p) { return !is_one_of(p.second, matmul_only); });
    run = end;
  }
  return ordered;
}

std::vector<GradBucket> make_unit_buckets(const std::vector<FlatEntry>& entries, const ParameterParts& parts,
                                          const std::vector<at::Tensor>& gathered_16bit, const RowSplit& split, const KeptWhole& kept_whole) {
  std::vector<GradBucket> units;
  int part = -1;
  bool in_16bit = false, in_whole = false;
  for (int i = 0; i < int(entries.size()); ++i) {
    const FlatEntry& e = entries[i];
    if (!split.name.empty() && e.name == split.name) {
      const int64_t rows = e.numel / split.row_numel, most = std::max<int64_t>(1, split.max_numel / split.row_numel);
      const int64_t blocks = (rows + most - 1) / most, per_block = (rows + blocks - 1) / blocks;
      for (int64_t first = 0; first < rows; first += per_block)
        units.push_back({e.offset + first * split.row_numel, std::min(per_block, rows - first) * split.row_numel, i, 1});
      part = -1;  // what follows starts a unit of its own
      continue;
    }
    const int p = parts.of(entries[i].name);
    const bool is_16bit = is_one_of(entries[i].param, gathered_16bit);
    const bool whole = kept_whole && kept_whole(entries[i].name);
    if (units.empty() || p != part || is_16bit != in_16bit || whole != in_whole) units.push_back({entries[i].offset, 0, i, 0, whole});
    part = p;
    in_16bit = is_16bit;
    in_whole = whole;
    units.back().numel += entries[i].numel;
    units.back().entries += 1;
  }
  return units;
}

bool is_row_unit(const GradBucket& unit, const std::vector<FlatEntry>& entries) {
  const FlatEntry& e = entries[size_t(unit.first_entry)];
  return unit.entries == 1 && (unit.offset != e.offset || unit.numel != e.numel);
}

}  // namespace dtrain

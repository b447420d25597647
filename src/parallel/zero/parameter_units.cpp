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
                                          const std::vector<at::Tensor>& gathered_16bit) {
  std::vector<GradBucket> units;
  int part = -1;
  bool in_16bit = false;
  for (int i = 0; i < int(entries.size()); ++i) {
    const int p = parts.of(entries[i].name);
    const bool is_16bit = is_one_of(entries[i].param, gathered_16bit);
    if (units.empty() || p != part || is_16bit != in_16bit) units.push_back({entries[i].offset, 0, i, 0});
    part = p;
    in_16bit = is_16bit;
    units.back().numel += entries[i].numel;
    units.back().entries += 1;
  }
  return units;
}

}  // namespace dtrain

#include "parallel/zero/parameter_units.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {

int forward_part_of(const std::string& name, int n_layer) {
  if (name.rfind("blocks.", 0) == 0) {
    const size_t end = name.find('.', 7);
    const int block = std::stoi(name.substr(7, end - 7));
    if (block < 0 || block >= n_layer) throw std::invalid_argument("parameter '" + name + "' names a block the model does not have");
    return block + 1;
  }
  if (name.rfind("wte.", 0) == 0 || name.rfind("wpe.", 0) == 0) return 0;
  if (name.rfind("ln_f.", 0) == 0 || name.rfind("lm_head.", 0) == 0) return n_layer + 1;
  throw std::invalid_argument("parameter '" + name + "' belongs to no part of the transformer's forward pass");
}

bool is_one_of(const at::Tensor& t, const std::vector<at::Tensor>& list) {
  return std::any_of(list.begin(), list.end(), [&](const at::Tensor& x) { return x.is_same(t); });
}

std::vector<std::pair<std::string, at::Tensor>> group_matmul_weights(const std::vector<std::pair<std::string, at::Tensor>>& named,
                                                                    int n_layer, const std::vector<at::Tensor>& matmul_only) {
  std::vector<std::pair<std::string, at::Tensor>> ordered(named.begin(), named.end());
  for (auto run = ordered.begin(); run != ordered.end();) {
    const int part = forward_part_of(run->first, n_layer);
    const auto end = std::find_if(run, ordered.end(), [&](const auto& p) { return forward_part_of(p.first, n_layer) != part; });
    std::stable_partition(run, end, [&](const auto& p) { return !is_one_of(p.second, matmul_only); });
    run = end;
  }
  return ordered;
}

std::vector<GradBucket> make_unit_buckets(const std::vector<FlatEntry>& entries, int n_layer,
                                          const std::vector<at::Tensor>& gathered_16bit) {
  std::vector<GradBucket> units;
  int part = -1;
  bool in_16bit = false;
  for (int i = 0; i < int(entries.size()); ++i) {
    const int p = forward_part_of(entries[i].name, n_layer);
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

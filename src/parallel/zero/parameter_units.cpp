#include "parallel/zero/parameter_units.h"

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

std::vector<GradBucket> make_unit_buckets(const std::vector<FlatEntry>& entries, int n_layer) {
  std::vector<GradBucket> units;
  int part = -1;
  for (int i = 0; i < int(entries.size()); ++i) {
    const int p = forward_part_of(entries[i].name, n_layer);
    if (units.empty() || p != part) units.push_back({entries[i].offset, 0, i, 0});
    part = p;
    units.back().numel += entries[i].numel;
    units.back().entries += 1;
  }
  return units;
}

}  // namespace dtrain

#include "model/forward_part_hooks.h"

namespace dtrain {

ForwardPart make_forward_part(ForwardPart::Kind kind, int index,
                              const std::vector<std::pair<std::string, const torch::nn::Module*>>& modules) {
  ForwardPart p{kind, index, {}};
  for (const auto& [prefix, module] : modules)
    for (const auto& item : module->named_parameters()) p.parameters.emplace_back(prefix + "." + item.key(), item.value());
  return p;
}

}  // namespace dtrain

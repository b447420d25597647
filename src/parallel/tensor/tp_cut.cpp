#include "parallel/tensor/tp_cut.h"

#include "model/vision_config.h"

namespace dtrain {

std::optional<int> tp_cut(const std::string& parameter, bool replicate_kv) {
  if (is_vision_side(parameter)) return std::nullopt;
  const size_t dot = parameter.rfind('.');
  const std::string kind = parameter.substr(dot + 1), layer = parameter.substr(0, dot);
  const std::string leaf = layer.substr(layer.rfind('.') + 1);
  if (leaf == "q_proj" || leaf == "gate_proj" || leaf == "up_proj" || leaf == "lm_head" || leaf == "wte") return 0;
  if (leaf == "k_proj" || leaf == "v_proj") return replicate_kv ? std::nullopt : std::optional<int>(0);
  if ((leaf == "o_proj" || leaf == "down_proj") && kind == "weight") return 1;
  return std::nullopt;
}

}  // namespace dtrain

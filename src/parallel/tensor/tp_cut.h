// Which tensor dim tensor parallelism cuts each parameter along (parallel/tensor/apply_tp.h), by
// the name of its layer: what apply_tp slices and what the memory estimate counts per rank.
#pragma once
#include <optional>
#include <string>

namespace dtrain {

// 0 for the column-parallel weights and biases (q, gate, up, an untied head, the token table; k and
// v unless `replicate_kv`: tp exceeds the key/value heads), 1 for the row-parallel weights (o,
// down); nullopt for a parameter every tp rank holds whole: norms, the row-parallel biases, GPT-2's
// position table, a vision-language model's vision encoder and connector.
std::optional<int> tp_cut(const std::string& parameter, bool replicate_kv);

}  // namespace dtrain

// Every parameter of the whole model with its shape, from the config alone: what a checkpoint's
// global index, a freeze glob or a planner needs to know without allocating a model (a 1B-parameter
// model's weights are 5 GB). The model itself is the reference: a test holds the two equal.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/transformer_config.h"

namespace dtrain {

struct ParameterShape {
  std::string name;
  std::vector<int64_t> shape;
};

// In the whole model's registration order (its named_parameters()).
std::vector<ParameterShape> parameter_shapes(const TransformerConfig& c);

// The names alone ("wte.weight", "blocks.0.q_proj.weight", ...), in the same order.
std::vector<std::string> parameter_names(const TransformerConfig& c);

// The LLM block parameter `name` belongs to ("[llm.]blocks.N.*": N), or nullopt for any other.
std::optional<int> block_of(const TransformerConfig& c, const std::string& name);

}  // namespace dtrain

// The model section: a preset or model.init_from's shape, with the shape keys the config gives.
#pragma once
#include "model/transformer_config.h"
#include "train/config_reader.h"

namespace dtrain {

// Throws ConfigError naming the key: a shape model.init_from fixes that the config contradicts, or a
// model that does not validate.
TransformerConfig resolve_model(const Reader& r);

}  // namespace dtrain

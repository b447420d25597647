// Reading Hugging Face's tokenizer.json into byte-level BPE's spec: the parts dtrain implements are
// taken, and anything that would make the reference tokenize differently (a normalizer, another
// model type, a pre-tokenizer pattern other than GPT-2's or Llama 3's, BPE dropout) is refused by
// name rather than silently tokenized otherwise.
#pragma once
#include <nlohmann/json.hpp>

#include "data/byte_level_bpe.h"

namespace dtrain {

// Throws std::invalid_argument naming the field at fault (e.g. "model.type is \"WordPiece\"; ...").
ByteLevelBpeSpec byte_level_bpe_spec(const nlohmann::json& file);

}  // namespace dtrain

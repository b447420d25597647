#include "train/vision_language_rules.h"

#include <string>

namespace dtrain {

void check_vision_language(const Reader& r, const TrainConfig& c) {
  if (!c.model.is_vlm()) return;
  const std::string model = "model.arch \"vlm\"";
  if (c.parallel.pp > 1)
    fail(c.origin, "'parallel.pp' (" + std::to_string(c.parallel.pp) + ") must be 1 for " + model +
                       ": pipeline stages hand on hidden states, not the images a vision-language model's first stage would need; "
                       "shard it with parallel.tp or zero_optimization.stage instead");
  if (c.parallel.cp > 1)
    fail(c.origin, "'parallel.cp' (" + std::to_string(c.parallel.cp) + ") must be 1 for " + model +
                       ": context parallelism would split each sequence, and the places its image tokens take, over the cp ranks");
  if (r.boolean("zero_optimization.stage3_gather_16bit_weights_on_model_save"))
    fail(c.origin, "'zero_optimization.stage3_gather_16bit_weights_on_model_save' exports each save as a Hugging Face GPT-2 or Llama "
                   "model, which a " + model + " is not; set it false");
}

}  // namespace dtrain

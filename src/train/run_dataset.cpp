#include "train/run_dataset.h"

#include <iostream>

#include "data/token_dataset.h"
#include "data/token_source.h"
#include "data/vlm_dataset.h"
#include "train/config_preflight.h"
#include "train/vision_language_rules.h"

namespace dtrain {

RunDataset load_run_dataset(const TrainConfig& c) {
  // `dtrain train` under a launcher has no preflight: the tokenizer is checked here as it is there.
  const std::unique_ptr<Tokenizer> tokenizer = c.tokenizer.empty() ? nullptr : load_run_tokenizer(c);
  if (is_vlm_source(c.data_source)) {
    std::shared_ptr<VlmDataset> images = load_vlm_dataset(c.data_source, vlm_data_options(c), tokenizer.get());
    if (!images->warning().empty()) std::cerr << "warning: " << images->warning() << "\n";
    std::string description = images->description();
    return {std::move(images), std::move(description)};
  }
  TokenSource source = load_tokens(c.data_source, tokenizer.get());
  if (!source.warning.empty()) std::cerr << "warning: " << source.warning << "\n";
  auto tokens = std::make_shared<TokenDataset>(source.tokens, c.model.seq_len, c.val_fraction, c.model.vocab_size);
  std::string description = source.description + " -> " + std::to_string(tokens->size(Split::Train)) + " training and " +
                            std::to_string(tokens->size(Split::Validation)) + " validation samples of " +
                            std::to_string(c.model.seq_len) + " tokens";
  return {std::move(tokens), std::move(description)};
}

}  // namespace dtrain

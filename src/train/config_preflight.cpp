#include "train/config_preflight.h"

#include <stdexcept>

#include "comm/world.h"
#include "common/unnamed_file.h"
#include "data/token_source.h"
#include "data/tokenizer.h"
#include "data/vlm_dataset.h"
#include "hf/hf_checkpoint_reader.h"
#include "model/parameter_shapes.h"
#include "train/failure_injection.h"
#include "train/freeze_globs.h"
#include "train/run_start.h"
#include "train/vision_language_rules.h"

namespace dtrain {

std::unique_ptr<Tokenizer> load_run_tokenizer(const TrainConfig& c) {
  try {
    std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(c.tokenizer);
    require_vocab_fits(*tokenizer, c.model.vocab_size, "model.vocab_size");
    return tokenizer;
  } catch (const std::exception& e) {
    throw ConfigError(std::string("data.tokenizer: ") + e.what());  // the file and what is wrong with it, or the sizes
  }
}

void preflight_config(const TrainConfig& c) {
  try {
    // Text: maps files and reads their headers, cheap at any corpus size (text is not tokenized here).
    // Images: every sample is checked as each rank will check it, so a bad one is named before any rank starts.
    if (is_vlm_source(c.data_source))
      load_vlm_dataset(c.data_source, vlm_data_options(c), c.tokenizer.empty() ? nullptr : load_run_tokenizer(c).get());
    else
      load_tokens(c.data_source);
  } catch (const std::exception& e) {
    throw ConfigError(e.what());  // it names data.source and the file
  }
  load_run_tokenizer(c);
  if (!c.freeze.empty()) require_freeze_globs_match(c.freeze, parameter_names(c.model));
  if (const std::string missing = backend_missing_from_build(c.backend); !missing.empty()) throw ConfigError(missing);
  for (const auto& [key, offload] : {std::pair{"zero_optimization.offload_optimizer", c.offload_optimizer},
                                     std::pair{"zero_optimization.offload_param", c.offload_param}}) {
    if (offload.device != "nvme") continue;
    try {
      check_unnamed_file_dir(offload.nvme_path);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(std::string(key) + ".nvme_path: " + e.what());  // as the trainer words it
    }
  }
  require_resume_path(c);
  require_injected_ranks_exist(c.inject_failure, c.world_size);
  if (!c.init_from.empty()) {
    try {
      HfCheckpointReader(c.init_from, c.model);  // checks every file and tensor shape, reads no weights
    } catch (const std::runtime_error& e) {
      throw ConfigError("model.init_from: " + std::string(e.what()));
    }
  }
}

TrainConfig load_run_config(const std::string& path, const std::vector<std::string>& sets, int world_size) {
  TrainConfig config = load_train_config(path, sets, world_size);
  preflight_config(config);
  return config;
}

}  // namespace dtrain

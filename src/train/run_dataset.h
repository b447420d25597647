// The samples a run trains on, from data.source: token windows of a text corpus, or images with
// text for a vision-language model (data/vlm_dataset.h).
#pragma once
#include <memory>
#include <string>

#include "data/sample_dataset.h"
#include "train/train_config.h"

namespace dtrain {

struct RunDataset {
  std::shared_ptr<const SampleDataset> samples;
  std::string description;  // for the run's log: what was read and how many samples of each split
};

// Warnings (a fallback corpus) go to stderr. Throws naming data.source, data.tokenizer or the file
// and line at fault.
RunDataset load_run_dataset(const TrainConfig& config);

}  // namespace dtrain

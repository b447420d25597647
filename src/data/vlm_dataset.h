// A vision-language dataset: samples of image, prompt and text, one sample per row of model.seq_len
// (the layout of data/vlm_row.h), from a jsonl file (data/vlm_jsonl.h) or the built-in OCR set
// (data/ocr_set.h). The last data.val_fraction of the samples is held out for validation.
//
// A batch's rows hold image placeholder tokens; its ImageBatch holds those images' patches
// (data/image_patches.h) in placeholder order. Images are made when a batch asks for them (decoded
// from their files, or rendered), so the dataset holds tokens and paths, never pixels. A batch
// without an image still carries defined, empty tensors (patches [0, channels·patch·patch], grids
// [0, 2]), so a model can run its encoder on no patch as on any.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/sample_dataset.h"
#include "data/text_line_renderer.h"
#include "data/tokenizer.h"
#include "data/vlm_data_options.h"
#include "data/vlm_sample.h"

namespace dtrain {

class VlmDataset : public SampleDataset {
 public:
  // `renderer` draws the samples whose image is rendered text; null when there are none. Throws
  // std::runtime_error naming `set.description` when there is no training sample.
  VlmDataset(SampleSet set, std::shared_ptr<const TextLineRenderer> renderer, const VlmDataOptions& options);

  int64_t size(Split split) const override { return split == Split::Train ? train_samples_ : val_samples_; }
  // Throws std::runtime_error naming the sample's file and line when its image can no longer be read
  // or has changed since load.
  Batch batch(Split split, const std::vector<int64_t>& indices) const override;

  // For generation and reports: a sample's text, prompt and image.
  const VlmSample& sample(Split split, int64_t index) const;
  // Sample `index`'s image as patches, the rows its ImageBatch would hold ([0, ...] when it has none).
  at::Tensor patches(Split split, int64_t index) const;

  // Bad samples left out under data.skip_bad_samples.
  int64_t skipped_samples() const { return skipped_; }
  // One line for the log: what was read, the split and what was skipped.
  const std::string& description() const { return description_; }
  // Non-empty when a fallback was taken (the synthetic corpus in place of the fortunes package).
  const std::string& warning() const { return warning_; }

 private:
  int64_t patch_values() const { return int64_t(options_.image.channels) * options_.image.patch_size * options_.image.patch_size; }

  std::vector<VlmSample> samples_;  // training samples, then validation samples
  std::shared_ptr<const TextLineRenderer> renderer_;
  VlmDataOptions options_;
  int64_t train_samples_ = 0, val_samples_ = 0, skipped_ = 0;
  std::string description_, warning_;
};

// Whether `source` (data.source) names a vision-language dataset: "vlm:FILE.jsonl" or "ocr".
bool is_vlm_source(const std::string& source);

// The dataset `source` names, its text tokenized by `tokenizer` (data.tokenizer) or as bytes when it
// is null. Throws std::invalid_argument naming an option's config key when it is out of range, and
// std::runtime_error naming the file (and line) at fault.
std::unique_ptr<VlmDataset> load_vlm_dataset(const std::string& source, const VlmDataOptions& options,
                                             Tokenizer* tokenizer = nullptr);

}  // namespace dtrain

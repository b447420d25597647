#include "data/vlm_dataset.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/printable.h"
#include "data/image_patches.h"
#include "data/ocr_set.h"
#include "data/vlm_jsonl.h"

namespace dtrain {

VlmDataset::VlmDataset(SampleSet set, std::shared_ptr<const TextLineRenderer> renderer, const VlmDataOptions& options)
    : samples_(std::move(set.samples)), renderer_(std::move(renderer)), options_(options), skipped_(set.skipped),
      warning_(std::move(set.warning)) {
  const int64_t n = int64_t(samples_.size()), splittable = n - set.training_only;
  val_samples_ = options.val_fraction > 0 && splittable > 0 ? std::max<int64_t>(1, int64_t(std::floor(options.val_fraction * splittable))) : 0;
  train_samples_ = n - val_samples_;
  if (train_samples_ < 1)
    throw std::runtime_error("data.source: " + set.description + " gives " + std::to_string(n) +
                             " samples, too few for one training sample with data.val_fraction " + std::to_string(options.val_fraction) +
                             (skipped_ ? " (" + std::to_string(skipped_) + " bad samples skipped, the first: " + set.first_skipped + ")" : ""));
  description_ = set.description + "; " + std::to_string(train_samples_) + " training, " + std::to_string(val_samples_) + " validation samples";
  if (skipped_)
    description_ += "; " + std::to_string(skipped_) + " bad samples skipped (data.skip_bad_samples), the first: " + set.first_skipped;
}

const VlmSample& VlmDataset::sample(Split split, int64_t index) const {
  if (index < 0 || index >= size(split))
    throw std::out_of_range("sample " + std::to_string(index) + " is outside the " +
                            (split == Split::Train ? "training" : "validation") + " split of " + std::to_string(size(split)));
  return samples_[size_t((split == Split::Train ? 0 : train_samples_) + index)];
}

at::Tensor VlmDataset::patches(Split split, int64_t index) const {
  const VlmSample& s = sample(split, index);
  if (s.image == ImageOrigin::None) return at::empty({0, patch_values()}, at::kFloat);
  Image image;
  if (s.image == ImageOrigin::RenderedText) {
    image = renderer_->render(s.text, s.render_seed);
  } else {
    try {
      image = load_image_file(s.image_path, options_.max_image_pixels);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("data.source: " + s.origin + ": " + e.what());
    }
  }
  if (image.width != s.image_size.width || image.height != s.image_size.height)
    throw std::runtime_error("data.source: " + s.origin + ": image '" + printable(s.image_path) + "' is " + std::to_string(image.width) +
                             "x" + std::to_string(image.height) + " pixels, " + std::to_string(s.image_size.width) + "x" +
                             std::to_string(s.image_size.height) + " when the data was loaded: it changed since");
  return image_to_patches(image, s.grid, options_.image.patch_size, options_.image.channels);
}

Batch VlmDataset::batch(Split split, const std::vector<int64_t>& indices) const {
  const int64_t rows = int64_t(indices.size()), seq_len = options_.row.seq_len;
  Batch batch{at::empty({rows, seq_len}, at::kLong), at::empty({rows, seq_len}, at::kLong), {}};
  std::vector<at::Tensor> pieces;  // each image's patches, in placeholder order
  std::vector<int64_t> grids;
  for (int64_t r = 0; r < rows; ++r) {
    const VlmSample& s = sample(split, indices[size_t(r)]);
    write_row(options_.row, image_tokens(s, options_), s.tokens, s.prompt_tokens, batch.x.data_ptr<int64_t>() + r * seq_len,
              batch.y.data_ptr<int64_t>() + r * seq_len);
    if (s.image == ImageOrigin::None) continue;
    pieces.push_back(patches(split, indices[size_t(r)]));
    grids.insert(grids.end(), {s.grid.height, s.grid.width});
  }
  batch.images.patches = pieces.empty() ? at::empty({0, patch_values()}, at::kFloat) : at::cat(pieces);
  batch.images.grids = at::tensor(grids, at::kLong).reshape({-1, 2});
  return batch;
}

bool is_vlm_source(const std::string& source) { return source == "ocr" || source.rfind("vlm:", 0) == 0; }

std::unique_ptr<VlmDataset> load_vlm_dataset(const std::string& source, const VlmDataOptions& options, Tokenizer* tokenizer) {
  validate(options);
  if (source == "ocr") {
    OcrSet ocr = build_ocr_set(options, tokenizer);
    return std::make_unique<VlmDataset>(std::move(ocr.set), std::move(ocr.renderer), options);
  }
  if (source.rfind("vlm:", 0) == 0) return std::make_unique<VlmDataset>(read_vlm_jsonl(source.substr(4), options, tokenizer), nullptr, options);
  throw std::invalid_argument("data.source: \"" + printable(source) + "\" is not a vision-language source (\"vlm:FILE.jsonl\" or \"ocr\")");
}

}  // namespace dtrain

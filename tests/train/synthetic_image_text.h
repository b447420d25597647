// A small vision-language dataset made up in memory, for the tests of how images travel from a
// batch to the model: sample i holds an image when i is even and none when it is odd, so that a
// sampler dealing round-robin over two ranks, unshuffled, gives rank 0 every image and rank 1 none.
// Rows are laid out as the data contract says (one sample a row): [image placeholders × image
// tokens][prompt][text][end], padded with the end token; targets are the text and the end, -100
// elsewhere. Every sample has one prompt token and kTextLength text tokens, so every row carries
// the same number of targets, kTextLength + 1, images or not: the mean loss of a micro-batch is
// then the mean over its targets whichever samples it groups, and one rank's accumulated
// micro-batches average like two ranks' (the equivalence the tests check).
#pragma once
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "data/sample_dataset.h"
#include "model/transformer_config.h"

namespace dtrain::test {

class SyntheticImageText : public SampleDataset {
 public:
  static constexpr int64_t kTextLength = 10;
  static constexpr int64_t kPrompt = 'P';

  // `train` and `validation` samples for `model` (arch vlm), whose row must hold the largest image's
  // tokens with the prompt, text and end.
  SyntheticImageText(const TransformerConfig& model, int64_t train, int64_t validation)
      : model_(model), train_(train), validation_(validation) {}

  int64_t size(Split split) const override { return split == Split::Train ? train_ : validation_; }

  Batch batch(Split split, const std::vector<int64_t>& indices) const override {
    const int64_t T = model_.seq_len, rows = int64_t(indices.size());
    const VisionConfig& v = model_.vision;
    at::Tensor row = at::full({rows, T + 1}, int64_t(v.end_token_id), at::kLong);
    at::Tensor y = at::full({rows, T}, int64_t(-100), at::kLong);
    std::vector<at::Tensor> patches;
    std::vector<int64_t> grids;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t sample = indices[size_t(r)] + (split == Split::Train ? 0 : train_);
      int64_t text = 0;  // where the prompt and the text start
      if (sample % 2 == 0) {
        const auto [gh, gw] = grid_of(sample);
        auto gen = at::make_generator<at::CPUGeneratorImpl>(uint64_t(sample) + 1);
        patches.push_back(at::empty({gh * gw, v.patch_values()}).uniform_(-1, 1, gen));
        grids.insert(grids.end(), {gh, gw});
        text = (gh / v.merge) * (gw / v.merge);
        row[r].narrow(0, 0, text).fill_(v.image_token_id);
      }
      row[r][text++] = kPrompt;
      for (int64_t t = 0; t < kTextLength; ++t) row[r][text + t] = 'a' + (sample * 7 + t * 3) % 26;
      // Targets: the text and the end, which positions text - 1 .. text + kTextLength - 1 predict.
      y[r].narrow(0, text - 1, kTextLength + 1).copy_(row[r].narrow(0, text, kTextLength + 1));
    }
    Batch b{row.narrow(1, 0, T).contiguous(), y, {}};
    if (!patches.empty()) {
      b.images.patches = at::cat(patches);
      b.images.grids = at::tensor(grids, at::kLong).view({int64_t(grids.size()) / 2, 2});
      if (split == Split::Train) images_drawn_ += b.images.count();
    }
    if (split == Split::Train) batches_drawn_ += 1;
    return b;
  }

  // What the training split has served: images, and batches.
  int64_t images_drawn() const { return images_drawn_; }
  int64_t batches_drawn() const { return batches_drawn_; }

 private:
  // Images of several sizes (2x4, 4x4, 2x8, 4x2 patches), so that ranks and micro-batches take
  // different numbers of image tokens.
  static std::pair<int64_t, int64_t> grid_of(int64_t sample) {
    static const std::pair<int64_t, int64_t> grids[] = {{2, 4}, {4, 4}, {2, 8}, {4, 2}};
    return grids[(sample / 2) % 4];
  }

  TransformerConfig model_;
  int64_t train_, validation_;
  mutable std::atomic<int64_t> images_drawn_{0}, batches_drawn_{0};
};

}  // namespace dtrain::test

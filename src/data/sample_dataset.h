// What a training step draws from: numbered samples in two splits, gathered into batches. Text
// (data/token_dataset.h) gives token windows; a vision-language dataset gives token rows whose
// image positions hold a placeholder id, and the images of those rows as patches. The sampler and
// the stream (data/micro_batch_stream.h) see only this interface, so every dataset resumes, deals
// and logs its samples the same way.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dtrain {

enum class Split { Train, Validation };

// The images of one batch, as the vision encoder reads them: every image cut into square patches of
// `channels·patch·patch` values, images in the order their placeholder tokens appear in the batch's
// rows (row after row, left to right), each image's patches row-major. Empty (undefined tensors) for
// text.
struct ImageBatch {
  at::Tensor patches;  // float32 [total patches, channels·patch·patch], pixels scaled to [-1, 1]
  at::Tensor grids;    // int64 [images, 2]: each image's height and width in patches
  int64_t count() const { return grids.defined() ? grids.size(0) : 0; }
};

struct Batch {
  at::Tensor x;  // int64 [batch, seq_len]: the model's input tokens
  at::Tensor y;  // int64 [batch, seq_len]: the targets; -100 where no loss is taken
  ImageBatch images;
};

class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  virtual int64_t size(Split split) const = 0;
  // The samples `indices` of `split`, on the CPU. Throws naming the sample's source (file, line) when
  // one cannot be read.
  virtual Batch batch(Split split, const std::vector<int64_t>& indices) const = 0;
};

}  // namespace dtrain

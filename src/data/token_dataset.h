// A token stream cut into training samples: sample i is the window of seq_len+1 tokens starting at
// i·seq_len (input = the first seq_len, target = the last seq_len). The last `val_fraction` of the
// windows is held out for validation, so the two splits never share a token. Windows are read from
// the stream as batches ask for them, so the dataset holds no copy of the corpus.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "data/sample_dataset.h"
#include "data/token_stream.h"

namespace dtrain {

class TokenDataset : public SampleDataset {
 public:
  // Throws std::invalid_argument when the stream is too short for one training sample (naming the
  // sizes) or a token is outside [0, vocab_size).
  // A stream whose widest token could reach vocab_size is read through once for the check.
  TokenDataset(TokenStream tokens, int seq_len, double val_fraction, int vocab_size);

  int64_t size(Split split) const override { return split == Split::Train ? train_samples_ : val_samples_; }
  int seq_len() const { return seq_len_; }
  // Inputs and targets, both int64 [indices.size(), seq_len] on the CPU; no images.
  Batch batch(Split split, const std::vector<int64_t>& indices) const override;

 private:
  TokenStream tokens_;
  int seq_len_;
  int64_t train_samples_ = 0, val_samples_ = 0;
};

}  // namespace dtrain

#include "data/token_dataset.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dtrain {

TokenDataset::TokenDataset(TokenStream tokens, int seq_len, double val_fraction, int vocab_size)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  if (val_fraction < 0 || val_fraction >= 1)
    throw std::invalid_argument("data.val_fraction must be in [0, 1), got " + std::to_string(val_fraction));
  const int64_t windows = (tokens_.size() - 1) / seq_len;
  val_samples_ = val_fraction > 0 ? std::max<int64_t>(1, int64_t(std::floor(val_fraction * windows))) : 0;
  train_samples_ = windows - val_samples_;
  if (train_samples_ < 1)
    throw std::invalid_argument("data: " + std::to_string(tokens_.size()) + " tokens are too few for one training sample of model.seq_len " +
                                std::to_string(seq_len) + " (with data.val_fraction " + std::to_string(val_fraction) + ")");
  if (tokens_.max_possible_token() >= vocab_size) {
    const int64_t max_token = tokens_.max_token();
    if (max_token >= vocab_size)
      throw std::invalid_argument("data: token " + std::to_string(max_token) + " is outside model.vocab_size " + std::to_string(vocab_size));
  }
}

Batch TokenDataset::batch(Split split, const std::vector<int64_t>& indices) const {
  const int64_t base = split == Split::Train ? 0 : train_samples_;
  const int64_t limit = size(split);
  auto windows = at::empty({int64_t(indices.size()), seq_len_ + 1}, at::kLong);
  int64_t* row = windows.data_ptr<int64_t>();
  for (const int64_t index : indices) {
    TORCH_CHECK(index >= 0 && index < limit, "sample ", index, " is out of range");
    tokens_.read((base + index) * seq_len_, seq_len_ + 1, row);
    row += seq_len_ + 1;
  }
  return {windows.narrow(1, 0, seq_len_).contiguous(), windows.narrow(1, 1, seq_len_).contiguous(), {}};
}

}  // namespace dtrain

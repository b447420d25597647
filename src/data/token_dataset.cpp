#include "data/token_dataset.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dtrain {

TokenDataset::TokenDataset(at::Tensor tokens, int seq_len, double val_fraction, int vocab_size)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  if (val_fraction < 0 || val_fraction >= 1)
    throw std::invalid_argument("data.val_fraction must be in [0, 1), got " + std::to_string(val_fraction));
  const int64_t windows = (tokens_.numel() - 1) / seq_len;
  val_samples_ = val_fraction > 0 ? std::max<int64_t>(1, int64_t(std::floor(val_fraction * windows))) : 0;
  train_samples_ = windows - val_samples_;
  if (train_samples_ < 1)
    throw std::invalid_argument("data: " + std::to_string(tokens_.numel()) + " tokens are too few for one training sample of model.seq_len " +
                                std::to_string(seq_len) + " (with data.val_fraction " + std::to_string(val_fraction) + ")");
  const int64_t max_token = tokens_.max().item<int64_t>(), min_token = tokens_.min().item<int64_t>();
  if (min_token < 0 || max_token >= vocab_size)
    throw std::invalid_argument("data: token " + std::to_string(max_token >= vocab_size ? max_token : min_token) +
                                " is outside model.vocab_size " + std::to_string(vocab_size));
}

std::pair<at::Tensor, at::Tensor> TokenDataset::batch(Split split, const std::vector<int64_t>& indices) const {
  const int64_t base = split == Split::Train ? 0 : train_samples_;
  const int64_t limit = size(split);
  auto windows = at::empty({int64_t(indices.size()), seq_len_ + 1}, at::kLong);
  for (size_t row = 0; row < indices.size(); ++row) {
    TORCH_CHECK(indices[row] >= 0 && indices[row] < limit, "sample ", indices[row], " is out of range");
    windows[row].copy_(tokens_.narrow(0, (base + indices[row]) * seq_len_, seq_len_ + 1));
  }
  return {windows.narrow(1, 0, seq_len_).contiguous(), windows.narrow(1, 1, seq_len_).contiguous()};
}

}  // namespace dtrain

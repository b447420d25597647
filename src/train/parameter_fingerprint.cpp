#include "train/parameter_fingerprint.h"

#include <algorithm>

namespace dtrain {

namespace {
// Summed a chunk at a time: widening a whole embedding to 64 bits would double it for a moment.
constexpr int64_t kChunk = 1 << 20;
}  // namespace

int64_t parameter_fingerprint(const std::vector<at::Tensor>& params) {
  uint64_t fingerprint = 0;  // unsigned: the sums wrap, which is all a fingerprint needs
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].element_size() == 4, "parameter_fingerprint: parameter ", i, " has ", params[i].element_size(),
                "-byte elements, not 4");
    const at::Tensor bits = params[i].detach().contiguous().view({-1}).view(at::kInt);
    uint64_t sum = 0;
    for (int64_t from = 0; from < bits.numel(); from += kChunk)
      sum += uint64_t(bits.narrow(0, from, std::min(kChunk, bits.numel() - from)).sum(at::kLong).item<int64_t>());
    fingerprint += sum * uint64_t(2 * i + 1);
  }
  return int64_t(fingerprint);
}

}  // namespace dtrain

#include "parallel/context/sequence_layout.h"

#include <stdexcept>
#include <string>

namespace dtrain {

SequenceLayout SequenceLayout::make(int64_t seq_len, int cp, int rank, bool zigzag) {
  if (cp < 1) throw std::invalid_argument("parallel.cp is " + std::to_string(cp) + ", must be at least 1");
  if (rank < 0 || rank >= cp)
    throw std::invalid_argument("cp rank " + std::to_string(rank) + " is outside [0, " + std::to_string(cp) + ") (parallel.cp " +
                                std::to_string(cp) + ")");
  SequenceLayout layout;
  layout.seq_len = seq_len;
  layout.cp = cp;
  layout.rank = rank;
  layout.zigzag = zigzag;
  const int n = layout.chunks();
  if (seq_len <= 0 || seq_len % n != 0)
    throw std::invalid_argument("model.seq_len " + std::to_string(seq_len) + " does not split into " + std::to_string(n) +
                                " equal chunks (" + (zigzag ? "2 * parallel.cp, the zigzag layout's" : "parallel.cp") +
                                " with parallel.cp " + std::to_string(cp) + ")");
  return layout;
}

std::vector<int> SequenceLayout::chunks_of(int r) const {
  if (zigzag) return {r, 2 * cp - 1 - r};
  return {r};
}

at::Tensor SequenceLayout::positions(at::Device device) const {
  std::vector<at::Tensor> parts;
  const int64_t len = chunk_len();
  for (int c : chunks_of(rank))
    parts.push_back(at::arange(c * len, (c + 1) * len, at::TensorOptions().dtype(at::kLong).device(device)));
  return at::cat(parts);
}

at::Tensor SequenceLayout::take(const at::Tensor& whole, int64_t dim) const {
  if (whole.size(dim) != seq_len)
    throw std::invalid_argument("SequenceLayout::take: dim " + std::to_string(dim) + " has " + std::to_string(whole.size(dim)) +
                                " tokens, the layout's model.seq_len is " + std::to_string(seq_len));
  std::vector<at::Tensor> parts;
  const int64_t len = chunk_len();
  for (int c : chunks_of(rank)) parts.push_back(whole.narrow(dim, c * len, len));
  return at::cat(parts, dim).contiguous();
}

}  // namespace dtrain

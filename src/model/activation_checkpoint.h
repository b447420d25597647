// Activation checkpointing: run a segment of the forward pass without keeping its intermediate
// activations, and recompute them in backward. LibTorch has no torch.utils.checkpoint, so this is
// its reentrant form as an autograd function: forward runs the segment with autograd off and saves
// only the inputs (and the random-number state); backward reruns it with autograd on from detached
// copies of the inputs, under the saved random-number state, and back-propagates through the
// recomputed graph, which accumulates the parameters' gradients and yields the inputs'.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

namespace dtrain {

using Segment = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// segment(inputs), with its activations recomputed in backward. Without grad mode it is a plain call.
at::Tensor checkpoint(Segment segment, const std::vector<at::Tensor>& inputs);

// What the transformer recomputes (train.activation_checkpointing).
struct ActivationCheckpointing {
  enum class Mode { None, Full, Selective, Every };
  Mode mode = Mode::None;
  int every = 1;  // Every: blocks 0, N, 2N, ... are recomputed whole

  // "none", "full", "selective" or "every:N" (N ≥ 1); throws std::invalid_argument otherwise.
  static ActivationCheckpointing parse(const std::string& text);
  std::string describe() const;
  // Whether block `layer` keeps only its input and is recomputed whole in backward.
  bool whole_block(int layer) const;
  // Whether attention's core (QKᵀ, softmax, ·V) is recomputed in backward.
  bool attention_core() const { return mode == Mode::Selective; }
};

}  // namespace dtrain

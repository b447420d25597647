// Activation checkpointing: run a segment of the forward pass without keeping its intermediate
// activations, and recompute them in backward. LibTorch has no torch.utils.checkpoint, so this is
// its reentrant form as an autograd function: forward runs the segment with autograd off and saves
// only the inputs (and the random-number state); backward reruns it with autograd on from detached
// copies of the inputs, under the saved random-number state, and back-propagates through the
// recomputed graph, which accumulates the parameters' gradients and yields the inputs'.
// An ActivationStore (DeepSpeed's activation_checkpointing keys) may keep the saved inputs split
// over a group, in host memory or in one buffer instead.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/activation_store.h"

namespace dtrain {

using Segment = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// segment(inputs), with its activations recomputed in backward. Without grad mode, or when neither
// an input nor (`trains`) one of the segment's own parameters needs a gradient (a block frozen
// behind frozen embeddings), it is a plain call, which autograd does not record. With a store, the
// inputs it takes are kept there and restored for the recomputation, and given back once the
// segment's backward is done.
at::Tensor checkpoint(Segment segment, const std::vector<at::Tensor>& inputs, std::shared_ptr<ActivationStore> store = nullptr,
                      bool trains = false);

// What the transformer recomputes (train.activation_checkpointing).
struct ActivationCheckpointing {
  enum class Mode { None, Full, Selective, Every };
  Mode mode = Mode::None;
  int every = 1;  // Every: blocks 0, N, 2N, ... are recomputed whole
  ActivationStoreOptions store;  // how the inputs of blocks recomputed whole are kept (activation_checkpointing.*)

  // "none", "full", "selective" or "every:N" (N ≥ 1); throws std::invalid_argument otherwise.
  static ActivationCheckpointing parse(const std::string& text);
  std::string describe() const;
  // Whether block `layer` keeps only its input and is recomputed whole in backward.
  bool whole_block(int layer) const;
  // How many of blocks [first, end) are recomputed whole: the inputs one forward pass checkpoints.
  int whole_blocks(int first, int end) const;
  // Whether attention's core (QKᵀ, softmax, ·V) is recomputed in backward.
  bool attention_core() const { return mode == Mode::Selective; }
};

}  // namespace dtrain

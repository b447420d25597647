// The parts of the transformer's forward pass, and what a parallelism does around each: ZeRO stage 3
// gathers a part's parameters just before it runs, frees them after, and arranges for them to be
// gathered again before the part's backward. The parts, in forward order: 0 the embeddings,
// 1..n_layer the blocks (block i is part i + 1), n_layer + 1 the final norm and the head. A model
// holding some of them (transformer.h's TransformerParts) keeps these global indices. A
// vision-language model's vision encoder and connector come first (vision_encoder.h: 0 the stem,
// 1..vision n_layer its blocks, then its final norm; the connector after it) and the LLM's parts
// follow them, numbered on from there.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// One part of a model, with the parameters it owns: each parameter belongs to exactly one part. A
// tied output head reads the token embedding's weight, which the embeddings part owns when the
// model holds it (the head's part when it does not).
struct ForwardPart {
  // Vision: a vision encoder's stem (patch embedding and positions) or its final norm; its blocks
  // are Blocks. Connector: a vision-language model's connector.
  enum class Kind { Embeddings, Block, Head, Vision, Connector };
  Kind kind;
  int index;  // the part's index in the whole model's forward pass (above)
  std::vector<std::pair<std::string, at::Tensor>> parameters;  // named as named_parameters() names them
  // What the part reads that another part owns (a tied head: "wte.weight"), so that ZeRO-3 keeps it
  // whole, or gathers it, until this part's backward is over.
  std::vector<std::string> borrowed = {};
};

// A part of these kind and index owning the parameters of `modules`, each named under its prefix.
ForwardPart make_forward_part(ForwardPart::Kind kind, int index,
                              const std::vector<std::pair<std::string, const torch::nn::Module*>>& modules);

class ForwardPartHooks {
 public:
  virtual ~ForwardPartHooks() = default;
  virtual void before_part(int part) = 0;
  // `output` is what the part hands on (its backward starts when this tensor's gradient is ready).
  virtual void after_part(int part, const at::Tensor& output) = 0;
};

}  // namespace dtrain

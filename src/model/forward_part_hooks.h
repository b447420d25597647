// What a parallelism does around each part of the transformer's forward pass: ZeRO stage 3 gathers
// a part's parameters just before it runs, frees them after, and arranges for them to be gathered
// again before the part's backward. The parts, in forward order: 0 the embeddings, 1..n_layer the
// blocks, n_layer + 1 the final norm and the head.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

class ForwardPartHooks {
 public:
  virtual ~ForwardPartHooks() = default;
  virtual void before_part(int part) = 0;
  // `output` is what the part hands on (its backward starts when this tensor's gradient is ready).
  virtual void after_part(int part, const at::Tensor& output) = 0;
};

}  // namespace dtrain

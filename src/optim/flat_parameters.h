// The trainable parameters packed into one flat buffer, with their gradients in a second one.
// Each parameter becomes a view into the flat data, and its .grad a view into the flat gradient,
// so autograd accumulates straight into the buffer that the optimizer steps in one pass and that
// data parallelism reduces in buckets. Without the gradient buffer (ZeRO stages 2 and 3, which keep
// only a shard of the gradient) autograd gives each parameter a gradient of its own; without either
// (stage 3, whose parameters live in per-unit buffers) only the layout is made. Order is reverse
// registration: the order backward produces gradients in, so a bucket fills front to back.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "optim/decay_spans.h"

namespace dtrain {

struct FlatEntry {
  std::string name;
  at::Tensor param;  // the module's parameter, now a view into FlatParameters::data()
  int64_t offset = 0;
  int64_t numel = 0;
  bool decay = true;  // weight decay applies (matrices and embeddings; not biases or norm weights)
};

class FlatParameters {
 public:
  enum class Buffers { ParametersAndGradients, Parameters, None };
  // `named` in registration order; parameters with requires_grad false are skipped (frozen).
  explicit FlatParameters(const std::vector<std::pair<std::string, at::Tensor>>& named,
                          Buffers buffers = Buffers::ParametersAndGradients);

  at::Tensor& data() { return data_; }  // undefined with Buffers::None
  at::Tensor& grad() { return grad_; }  // undefined without the gradient buffer
  const std::vector<FlatEntry>& entries() const { return entries_; }
  int64_t numel() const { return numel_; }
  const at::TensorOptions& options() const { return options_; }
  // Where weight decay applies (matrices and embeddings), in the buffer's coordinates.
  const Spans& decay_spans() const { return decay_spans_; }
  // Zeroes the flat gradient in place (the views stay attached; .grad is never reset to undefined);
  // without the buffer, resets each parameter's gradient.
  void zero_grad();

 private:
  std::vector<FlatEntry> entries_;
  int64_t numel_ = 0;
  at::TensorOptions options_;
  Spans decay_spans_;
  at::Tensor data_, grad_;
};

}  // namespace dtrain

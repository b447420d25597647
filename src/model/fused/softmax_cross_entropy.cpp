#include "model/fused/softmax_cross_entropy.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "model/fused/softmax_cross_entropy_kernel.h"

namespace dtrain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a profile calls the kernel's time, forward and backward.
constexpr const char* kCrossEntropyScope = "dtrain::cross_entropy";

fused::CrossEntropyRows rows_of(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& lse, int64_t ignore_index) {
  fused::CrossEntropyRows r;
  r.rows = logits.size(0);
  r.vocab = logits.size(1);
  r.type = logits.scalar_type();
  r.logits = logits.data_ptr();
  r.targets = targets.data_ptr<int64_t>();
  r.ignore_index = ignore_index;
  r.lse = lse.data_ptr<float>();
  return r;
}

struct SoftmaxCrossEntropy : public torch::autograd::Function<SoftmaxCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in, const at::Tensor& targets_in, int64_t ignore_index) {
    RECORD_USER_SCOPE(kCrossEntropyScope);
    const at::Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
    const int64_t vocab = logits.size(1);
    const bool in_range = ((targets >= 0).logical_and(targets < vocab)).logical_or(targets == ignore_index).all().item<bool>();
    TORCH_CHECK(in_range, "cross-entropy: a target is outside the vocabulary [0, ", vocab, ") and is not the ignore index ", ignore_index);
    const int64_t counted = (targets != ignore_index).sum().item<int64_t>();
    const at::Tensor lse = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
    const double total = fused::cross_entropy_forward(rows_of(logits, targets, lse, ignore_index));
    ctx->save_for_backward({logits, targets, lse});
    ctx->saved_data["counted"] = counted;
    ctx->saved_data["ignore_index"] = ignore_index;
    // No target counted: 0/0, NaN, as ATen's mean.
    return at::scalar_tensor(static_cast<float>(total / static_cast<double>(counted)), logits.options().dtype(at::kFloat));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    RECORD_USER_SCOPE(kCrossEntropyScope);
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &lse = saved[2];
    const float scale = grad_outputs[0].item<float>() / static_cast<float>(ctx->saved_data["counted"].toInt());
    at::Tensor grad = at::empty_like(logits);
    fused::cross_entropy_backward(rows_of(logits, targets, lse, ctx->saved_data["ignore_index"].toInt()), scale, grad.data_ptr());
    return {grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool fused_cross_entropy_applies(const at::Tensor& logits, const at::Tensor& targets) {
  const auto t = logits.scalar_type();
  return logits.device().is_cpu() && targets.device().is_cpu() && logits.dim() == 2 && targets.dim() == 1 &&
         logits.size(0) == targets.size(0) && logits.size(1) > 0 && targets.scalar_type() == at::kLong &&
         (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf);
}

at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index) {
  TORCH_CHECK(fused_cross_entropy_applies(logits, targets), "fused_cross_entropy: CPU logits [rows, vocab] in fp32, bf16 or fp16 and int64 targets [rows] expected, got ",
              logits.scalar_type(), " ", logits.sizes(), " on ", logits.device(), " and ", targets.scalar_type(), " ", targets.sizes());
  return SoftmaxCrossEntropy::apply(logits, targets, ignore_index);
}

}  // namespace dtrain

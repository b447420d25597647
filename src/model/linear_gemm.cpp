#include "model/linear_gemm.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>
#include <string_view>

#include "model/weight_grad_store.h"

namespace dtrain {

namespace {

using OneDnnLinear = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, std::string_view,
                                c10::List<std::optional<at::Scalar>>, std::optional<std::string_view>);

// ATen's operator over oneDNN's inner product, found once; absent from a LibTorch built without oneDNN.
const std::optional<c10::TypedOperatorHandle<OneDnnLinear>>& onednn_linear() {
  static const std::optional<c10::TypedOperatorHandle<OneDnnLinear>> op = []() -> std::optional<c10::TypedOperatorHandle<OneDnnLinear>> {
    if (!at::hasMKLDNN()) return std::nullopt;
    const auto handle = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
    if (!handle) return std::nullopt;
    return handle->typed<OneDnnLinear>();
  }();
  return op;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Inputs {x, weight} or {x, weight, bias}: autograd takes no undefined tensor as an input.
struct LinearFp32 : public torch::autograd::Function<LinearFp32> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList inputs) {
    const at::Tensor &x = inputs[0], &weight = inputs[1];
    ctx->save_for_backward({weight.requires_grad() ? x : at::Tensor(), x.requires_grad() ? weight : at::Tensor()});
    ctx->saved_data["bias"] = inputs.size() == 3;
    ctx->saved_data["weight"] = weight;  // the parameter a deferred gradient is added to
    return matmul_nt(x, weight, inputs.size() == 3 ? inputs[2] : at::Tensor());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &g = grad_outputs[0];
    const bool has_bias = ctx->saved_data["bias"].toBool();
    variable_list grads(has_bias ? 3 : 2);
    if (ctx->needs_input_grad(0)) grads[0] = matmul_nt(g, weight.t());
    const at::Tensor g2 = g.reshape({-1, g.size(-1)});
    // The input without its autograd history: a deferred gradient (weight_grad_store.h) would otherwise
    // keep the graph behind it alive until W, down to the leaf it started from and that leaf's gradient.
    auto weight_grad = [g2, x = x.defined() ? x.detach() : x] { return matmul_nt(g2.t(), x.reshape({-1, x.size(-1)}).t()); };
    if (ctx->needs_input_grad(1)) {
      if (WeightGradStore* store = deferred_weight_grads()) {
        store->defer(ctx->saved_data["weight"].toTensor(), weight_grad);
      } else {
        grads[1] = weight_grad();
      }
    }
    if (has_bias && ctx->needs_input_grad(2)) grads[2] = g2.sum(0);
    return grads;
  }
};

}  // namespace

bool onednn_available() { return onednn_linear().has_value(); }

// oneDNN builds no inner product over no rows (a vision encoder's batch without images): ATen's takes them.
bool matmul_nt_uses_onednn(const at::Tensor& a) {
  return a.is_cpu() && a.scalar_type() == at::kFloat && a.is_contiguous() && a.numel() > 0 && onednn_available();
}

at::Tensor onednn_matmul_nt(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  TORCH_CHECK(onednn_available(), "onednn_matmul_nt: this LibTorch has no oneDNN");
  return onednn_linear()->call(a, b, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, "none",
                               c10::List<std::optional<at::Scalar>>(), std::nullopt);
}

at::Tensor matmul_nt(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  return matmul_nt_uses_onednn(a) ? onednn_matmul_nt(a, b, bias) : at::linear(a, b, bias);
}

at::Tensor linear_fp32(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  // at::linear's own backward cannot leave its weight gradient for later: under a guard, forward
  // takes the function that can (the same products through ATen's kernels).
  if (!matmul_nt_uses_onednn(x) && !deferred_weight_grads()) return at::linear(x, weight, bias);
  std::vector<at::Tensor> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return LinearFp32::apply(at::TensorList(inputs));
}

}  // namespace dtrain

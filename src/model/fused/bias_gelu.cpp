#include "model/fused/bias_gelu.h"

#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "model/fused/bias_gelu_kernel.h"
#include "model/fused/token_sum.h"

namespace dtrain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct BiasGeluTanh : public torch::autograd::Function<BiasGeluTanh> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const at::Tensor& bias, MixedPrecision mp) {
    RECORD_FUNCTION("dtrain::bias_gelu_tanh", std::vector<c10::IValue>({y}));
    ctx->saved_data["round"] = mp.round_gradients;
    ctx->saved_data["compute"] = int64_t(mp.compute);
    const bool fused = bias_gelu_kernel_applies(y);
    ctx->saved_data["fused"] = fused;
    if (fused) {
      const at::Tensor y2 = y.reshape({-1, y.size(-1)}).contiguous(), b = bias.to(at::kFloat).contiguous();
      ctx->save_for_backward({y2, b});
      return bias_gelu_forward_cpu(y2, b).view(y.sizes());
    }
    const at::Tensor pre = y + bias.to(y.scalar_type());
    ctx->save_for_backward({pre});
    return at::gelu(pre, "tanh");
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    RECORD_FUNCTION("dtrain::bias_gelu_tanh_backward", std::vector<c10::IValue>({grad_outputs[0]}));
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_outputs[0];
    const bool bias_grad = ctx->needs_input_grad(1);
    at::Tensor dy, db;
    if (ctx->saved_data["fused"].toBool()) {
      const at::Tensor &y2 = saved[0], &b = saved[1];
      BiasGeluGrads grads = bias_gelu_backward_cpu(g.reshape(y2.sizes()).to(y2.scalar_type()).contiguous(), y2, b, bias_grad);
      dy = grads.input.view(g.sizes());
      db = grads.bias;
    } else {
      dy = at::gelu_backward(g, saved[0], "tanh");
      if (bias_grad) db = sum_over_tokens_fp32(dy);
    }
    if (db.defined()) {
      MixedPrecision mp;
      mp.compute = at::ScalarType(ctx->saved_data["compute"].toInt());
      mp.round_gradients = ctx->saved_data["round"].toBool();
      db = mp.kept_gradient(db);
    }
    return {dy, db, at::Tensor()};
  }
};

// The forward pass alone on CUDA: ATen's addmm with cuBLASLt's bias + GELU (tanh) epilogue.
at::Tensor addmm_gelu_tanh(const LinearImpl& layer, const at::Tensor& x, const at::Tensor& bias) {
  const MixedPrecision& mp = layer.precision();
  const at::Tensor& operand = mp.enabled() ? layer.working : layer.weight;
  TORCH_CHECK(operand.defined(), "linear_gelu_tanh: the working copy of a ", c10::str(layer.weight.sizes()),
              " weight is missing (refresh_working_copy not called?)");
  const at::Tensor x2 = x.to(operand.scalar_type()).reshape({-1, x.size(-1)});
  const at::Tensor out = at::_addmm_activation(bias.to(operand.scalar_type()), x2, operand.t(), 1, 1, /*use_gelu=*/true);
  auto sizes = x.sizes().vec();
  sizes.back() = operand.size(0);
  return out.view(sizes);
}

}  // namespace

at::Tensor bias_gelu_tanh(const at::Tensor& y, const at::Tensor& bias, const MixedPrecision& mp) {
  return BiasGeluTanh::apply(y, bias, mp);
}

at::Tensor linear_gelu_tanh(LinearImpl& layer, const at::Tensor& x) {
  const at::Tensor bias = layer.read_bias();
  if (!bias.defined()) return at::gelu(layer.forward(x), "tanh");
  if (x.is_cuda() && !at::GradMode::is_enabled() && !layer.has_output_reduction()) return addmm_gelu_tanh(layer, x, bias);
  // Training on a GPU: the linear adds its bias in the GEMM's epilogue, and GELU is ATen's kernel.
  if (x.is_cuda()) return at::gelu(layer.forward(x), "tanh");
  return bias_gelu_tanh(layer.product(x), bias, layer.precision());
}

}  // namespace dtrain

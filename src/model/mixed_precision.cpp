#include "model/mixed_precision.h"

#include <torch/csrc/autograd/custom_function.h>

#include "model/fused/token_sum.h"
#include "model/linear_gemm.h"
#include "model/weight_grad_store.h"

namespace dtrain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool cpu_has_native_gemm(at::ScalarType compute) {
#if defined(__x86_64__)
  return compute == at::kBFloat16 ? __builtin_cpu_supports("avx512bf16") : __builtin_cpu_supports("avx512fp16");
#else
  (void)compute;
  return false;
#endif
}

}  // namespace

at::Tensor gemm_nt(const MixedPrecision& mp, const at::Tensor& a, const at::Tensor& b, at::ScalarType out) {
  if (!mp.enabled()) return matmul_nt(a, b).to(out);
  if (mp.native_gemm) {
    // Only CUDA's GEMM hands out fp32 sums of 16-bit operands unrounded; elsewhere they round first.
    if (out == at::kFloat && a.is_cuda() && a.dim() == 2) return at::mm(a, b.t(), at::kFloat);
    return at::matmul(a, b.t()).to(out);
  }
  return matmul_nt(a.to(at::kFloat), b.to(at::kFloat)).to(out);
}

namespace {

// Inputs {x, working, weight} or {x, working, weight, bias}: a list, because autograd takes no
// undefined tensor as an input and GEMMs without bias are common.
struct MixedLinear : public torch::autograd::Function<MixedLinear> {
  static at::Tensor forward(AutogradContext* ctx, MixedPrecision mp, at::TensorList inputs) {
    const at::Tensor &x = inputs[0], &working = inputs[1];  // inputs[2], the weight, is there for its gradient
    const bool has_bias = inputs.size() == 4;
    ctx->save_for_backward({x, working});
    ctx->saved_data["native"] = mp.native_gemm;
    ctx->saved_data["compute"] = int64_t(mp.compute);
    ctx->saved_data["round"] = mp.round_gradients;
    ctx->saved_data["bias"] = has_bias;
    ctx->saved_data["weight"] = inputs[2];  // the parameter a deferred gradient is added to
    // On a GPU the bias rides in the GEMM's epilogue (at::linear's addmm, cuBLASLt): as a separate
    // broadcast add it was 9% of the kernel time of a 300M-parameter model's step on an H200.
    if (has_bias && mp.native_gemm && x.is_cuda()) return at::linear(x, working, inputs[3].to(mp.compute));
    at::Tensor y = gemm_nt(mp, x, working, mp.native_gemm ? mp.compute : at::kFloat);
    if (has_bias) y = y + (mp.native_gemm ? inputs[3].to(mp.compute) : inputs[3]);
    return y.to(mp.compute);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &working = saved[1];
    MixedPrecision mp;
    mp.native_gemm = ctx->saved_data["native"].toBool();
    mp.compute = at::ScalarType(ctx->saved_data["compute"].toInt());
    mp.round_gradients = ctx->saved_data["round"].toBool();
    // Widened once here (on that path) rather than inside each of the two GEMMs below.
    const at::Tensor g = mp.operand(grad_outputs[0]);
    // {mp, x, working, weight[, bias]}; needs_input_grad counts the tensors alone.
    const bool has_bias = ctx->saved_data["bias"].toBool();
    variable_list grads(has_bias ? 5 : 4);
    if (ctx->needs_input_grad(0)) grads[1] = gemm_nt(mp, g, working.t(), mp.compute);
    // A weight gradient is a sum over every token: fp32 keeps what 16 bits would round away.
    const at::Tensor g2 = g.reshape({-1, g.size(-1)});
    // Detached for a deferred gradient, as in linear_fp32.
    auto weight_grad = [mp, g2, x = x.defined() ? x.detach() : x] {
      return mp.kept_gradient(gemm_nt(mp, g2.t(), x.reshape({-1, x.size(-1)}).t(), at::kFloat));
    };
    if (ctx->needs_input_grad(2)) {
      if (WeightGradStore* store = deferred_weight_grads()) {
        store->defer(ctx->saved_data["weight"].toTensor(), weight_grad);
      } else {
        grads[3] = weight_grad();
      }
    }
    // Summed in fp32 from the 16-bit gradient as it is, without an fp32 copy of the whole [tokens, out]
    // gradient (which ATen 2.11's CPU sum with an fp32 dtype makes first).
    if (has_bias && ctx->needs_input_grad(3)) grads[4] = mp.kept_gradient(sum_over_tokens_fp32(g2));
    return grads;
  }
};

}  // namespace

std::string precision_name(at::ScalarType compute) {
  return compute == at::kBFloat16 ? "bf16" : compute == at::kHalf ? "fp16" : "fp32";
}

MixedPrecision MixedPrecision::make(at::ScalarType compute, const at::Device& device) {
  MixedPrecision mp;
  mp.compute = compute;
  mp.native_gemm = compute == at::kFloat || !device.is_cpu() || cpu_has_native_gemm(compute);
  return mp;
}

std::string MixedPrecision::describe() const {
  if (!enabled()) return "fp32";
  const std::string name = precision_name(compute);
  return name + " (fp32 master weights, " + (round_gradients ? name : "fp32") + " gradients; GEMMs " +
         (native_gemm ? "in " + name : "in fp32 on " + name + " operands") + ")";
}

at::Tensor MixedPrecision::operand(const at::Tensor& t) const {
  if (!enabled()) return t;
  at::Tensor rounded = t.to(compute);
  return native_gemm ? rounded : rounded.to(at::kFloat);
}

at::Tensor mixed_linear(const MixedPrecision& mp, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& working,
                        const at::Tensor& bias) {
  if (!mp.enabled()) return linear_fp32(x, weight, bias);
  TORCH_CHECK(working.defined() && working.scalar_type() == mp.compute, "mixed_linear: the working copy of a ",
              c10::str(weight.sizes()), " weight is missing or not ", precision_name(mp.compute),
              " (refresh_working_copy not called?)");
  std::vector<at::Tensor> inputs{x.to(mp.compute), working, weight};
  if (bias.defined()) inputs.push_back(bias);
  return MixedLinear::apply(mp, at::TensorList(inputs));
}

}  // namespace dtrain

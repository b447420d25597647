#include "model/fused/residual_norm.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "model/fused/residual_norm_kernel.h"

namespace dtrain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a profile calls the kernel's time, forward and backward.
constexpr const char* kResidualNormScope = "dtrain::residual_norm";

// Which of the optional inputs are there. The inputs come as a list, x then those present in this
// order: product, bias, weight, norm bias (autograd takes no undefined tensor as an input).
struct Layout {
  bool product = false, bias = false, norm = false, norm_bias = false, rms = false;
  double eps = 0;
  at::ScalarType bias_grad_type = at::kFloat;
};

struct ResidualNormFunction : public torch::autograd::Function<ResidualNormFunction> {
  static variable_list forward(AutogradContext* ctx, Layout layout, at::TensorList inputs) {
    RECORD_USER_SCOPE(kResidualNormScope);
    size_t next = 0;
    const at::Tensor x = inputs[next++].contiguous();
    const at::Tensor product = layout.product ? inputs[next++].contiguous() : at::Tensor();
    const at::Tensor bias = layout.bias ? inputs[next++].contiguous() : at::Tensor();
    const at::Tensor weight = layout.norm ? inputs[next++].contiguous() : at::Tensor();
    const at::Tensor norm_bias = layout.norm_bias ? inputs[next++].contiguous() : at::Tensor();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    fused::ResidualNormRows r;
    r.rows = rows;
    r.features = d;
    r.x = x.data_ptr<float>();
    variable_list out;
    at::Tensor h, mean, rstd;
    if (layout.product) {
      r.product_type = product.scalar_type();
      r.product = product.data_ptr();
      r.bias = layout.bias ? bias.data_ptr<float>() : nullptr;
      h = at::empty_like(x);
      r.h = h.data_ptr<float>();
      out.push_back(h);
    }
    if (layout.norm) {
      r.weight = weight.data_ptr<float>();
      r.norm_bias = layout.norm_bias ? norm_bias.data_ptr<float>() : nullptr;
      r.eps = static_cast<float>(layout.eps);
      r.rms = layout.rms;
      const at::Tensor n = at::empty_like(x);
      r.n = n.data_ptr<float>();
      rstd = at::empty({rows}, x.options());
      r.rstd = rstd.data_ptr<float>();
      if (!layout.rms) {
        mean = at::empty({rows}, x.options());
        r.mean = mean.data_ptr<float>();
      }
      out.push_back(n);
    }
    fused::residual_norm_forward(r);
    // The norm's backward reads its input (h, or x without a product), mean, rstd and weight; the
    // add's needs nothing but the product's type and shape.
    if (layout.norm) ctx->save_for_backward({layout.product ? h : x, weight, mean, rstd});
    ctx->saved_data["product_type"] = int64_t(layout.product ? product.scalar_type() : at::kFloat);
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["features"] = d;
    ctx->saved_data["layout"] = c10::IValue(std::vector<bool>{layout.product, layout.bias, layout.norm, layout.norm_bias, layout.rms});
    ctx->saved_data["bias_grad_type"] = int64_t(layout.bias_grad_type);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    RECORD_USER_SCOPE(kResidualNormScope);
    const auto flags = ctx->saved_data["layout"].toBoolList();
    const bool has_product = flags[0], has_bias = flags[1], has_norm = flags[2], has_norm_bias = flags[3];
    const auto product_type = at::ScalarType(ctx->saved_data["product_type"].toInt());
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const int64_t d = ctx->saved_data["features"].toInt();
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    auto fp32_rows = [](const at::Tensor& g) { return g.defined() ? g.to(at::kFloat).contiguous() : at::Tensor(); };
    const at::Tensor d_h = has_product ? fp32_rows(grad_outputs[0]) : at::Tensor();
    const at::Tensor d_n = has_norm ? fp32_rows(grad_outputs.back()) : at::Tensor();

    fused::ResidualNormRows r;
    r.features = d;
    r.rows = c10::multiply_integers(sizes) / d;
    r.product_type = product_type;
    r.rms = flags[4];
    const variable_list saved = has_norm ? ctx->get_saved_variables() : variable_list();
    if (has_norm) {
      r.x = saved[0].data_ptr<float>();  // the norm's input: h, or x without a product
      r.weight = saved[1].data_ptr<float>();
      r.mean = flags[4] ? nullptr : saved[2].data_ptr<float>();
      r.rstd = saved[3].data_ptr<float>();
    }
    fused::ResidualNormGrads g;
    g.d_h = d_h.defined() ? d_h.data_ptr<float>() : nullptr;
    g.d_n = d_n.defined() ? d_n.data_ptr<float>() : nullptr;
    const at::Tensor d_x = at::empty(sizes, f32);
    g.d_x = d_x.data_ptr<float>();
    at::Tensor d_product = d_x;
    if (has_product && product_type != at::kFloat) {
      d_product = at::empty(sizes, f32.dtype(product_type));
      g.d_product = d_product.data_ptr();
    }
    at::Tensor d_bias, d_weight, d_norm_bias;
    if (has_bias) g.d_bias = (d_bias = at::empty({d}, f32)).data_ptr<float>();
    if (has_norm) g.d_weight = (d_weight = at::empty({d}, f32)).data_ptr<float>();
    if (has_norm_bias) g.d_norm_bias = (d_norm_bias = at::empty({d}, f32)).data_ptr<float>();
    fused::residual_norm_backward(r, g);

    const auto round_type = at::ScalarType(ctx->saved_data["bias_grad_type"].toInt());
    if (has_bias && round_type != at::kFloat) d_bias = d_bias.to(round_type).to(at::kFloat);
    // {layout, x, then the optional inputs in their order}.
    variable_list grads{at::Tensor(), d_x};
    if (has_product) grads.push_back(d_product);
    if (has_bias) grads.push_back(d_bias);
    if (has_norm) grads.push_back(d_weight);
    if (has_norm_bias) grads.push_back(d_norm_bias);
    return grads;
  }
};

bool is_cpu_fp32(const at::Tensor& t) { return !t.defined() || (t.device().is_cpu() && t.scalar_type() == at::kFloat); }

// Where the CPU kernel applies: an fp32 residual stream on the CPU, the product the same shape in a
// type the kernel reads, fp32 parameters of the model's width.
bool fusable(const at::Tensor& x, const at::Tensor& product, const at::Tensor& bias, const NormParams* norm) {
  if (!x.defined() || x.dim() < 1 || !is_cpu_fp32(x) || x.numel() == 0) return false;
  const int64_t d = x.size(-1);
  auto width = [d](const at::Tensor& p) { return !p.defined() || (is_cpu_fp32(p) && p.dim() == 1 && p.size(0) == d); };
  if (product.defined()) {
    const auto t = product.scalar_type();
    if (!product.device().is_cpu() || product.sizes() != x.sizes() || (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf))
      return false;
  }
  return width(bias) && (!norm || (norm->weight.defined() && width(norm->weight) && width(norm->bias)));
}

variable_list run_fused(const ResidualAdd* add, const at::Tensor& x, const NormParams* norm) {
  Layout layout;
  std::vector<at::Tensor> inputs{x};
  if (add) {
    layout.product = true;
    inputs.push_back(add->product);
    layout.bias = add->bias.defined();
    if (layout.bias) inputs.push_back(add->bias);
    layout.bias_grad_type = add->bias_grad_type;
  }
  if (norm) {
    layout.norm = true;
    layout.rms = norm->rms;
    layout.eps = norm->eps;
    inputs.push_back(norm->weight);
    layout.norm_bias = norm->bias.defined();
    if (layout.norm_bias) inputs.push_back(norm->bias);
  }
  return ResidualNormFunction::apply(layout, at::TensorList(inputs));
}

}  // namespace

at::Tensor unfused_residual(const ResidualAdd& add) {
  if (!add.bias.defined()) return add.x + add.product;
  return add.x + (add.product + add.bias.to(add.product.scalar_type()));
}

at::Tensor unfused_norm(const at::Tensor& x, const NormParams& norm) {
  if (norm.rms) return at::rms_norm(x, {x.size(-1)}, norm.weight, norm.eps);
  return at::layer_norm(x, {x.size(-1)}, norm.weight, norm.bias, norm.eps);
}

ResidualAndNorm add_residual_and_norm(const ResidualAdd& add, const NormParams& norm) {
  if (!fusable(add.x, add.product, add.bias, &norm)) {
    const at::Tensor h = unfused_residual(add);
    return {h, unfused_norm(h, norm)};
  }
  const auto out = run_fused(&add, add.x, &norm);
  return {out[0], out[1]};
}

at::Tensor add_residual(const ResidualAdd& add) {
  if (!fusable(add.x, add.product, add.bias, nullptr)) return unfused_residual(add);
  return run_fused(&add, add.x, nullptr)[0];
}

at::Tensor normalize(const at::Tensor& x, const NormParams& norm) {
  if (!fusable(x, at::Tensor(), at::Tensor(), &norm)) return unfused_norm(x, norm);
  return run_fused(nullptr, x, &norm)[0];
}

}  // namespace dtrain

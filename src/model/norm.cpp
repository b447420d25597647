#include "model/norm.h"

namespace dtrain {

NormImpl::NormImpl(Kind kind, int64_t features, double eps) : kind_(kind), eps_(eps) {
  weight = register_parameter("weight", at::ones({features}));
  if (kind == Kind::LayerNorm) bias = register_parameter("bias", at::zeros({features}));
}

at::Tensor NormImpl::forward(const at::Tensor& x) { return normalize(x, params()); }

ResidualAndNorm NormImpl::forward_residual(const ResidualAdd& add) { return add_residual_and_norm(add, params()); }

NormParams NormImpl::params() const {
  auto read = [this](const at::Tensor& p) { return view_ && p.defined() ? view_(p) : p; };
  return {kind_ == Kind::RmsNorm, read(weight), read(bias), eps_};
}

}  // namespace dtrain

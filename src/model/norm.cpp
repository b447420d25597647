#include "model/norm.h"

namespace dtrain {

NormImpl::NormImpl(Kind kind, int64_t features, double eps) : kind_(kind), eps_(eps) {
  weight = register_parameter("weight", at::ones({features}));
  if (kind == Kind::LayerNorm) bias = register_parameter("bias", at::zeros({features}));
}

at::Tensor NormImpl::forward(const at::Tensor& x) {
  const at::Tensor w = view_ ? view_(weight) : weight;
  if (kind_ == Kind::LayerNorm) return at::layer_norm(x, {weight.size(0)}, w, view_ ? view_(bias) : bias, eps_);
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps_) * w;
}

}  // namespace dtrain

#include "model/linear.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool has_bias) {
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  if (has_bias) bias = register_parameter("bias", at::zeros({out_features}));
}

LinearImpl::LinearImpl(at::Tensor shared_weight) : weight(std::move(shared_weight)) {}

at::Tensor LinearImpl::forward(const at::Tensor& x) {
  if (!reduce_) return mixed_linear(mp_, x, weight, working, bias);
  const at::Tensor y = product(x);
  if (!bias.defined()) return y;
  return y + read_bias().to(y.scalar_type());
}

at::Tensor LinearImpl::product(const at::Tensor& x) {
  const at::Tensor y = mixed_linear(mp_, x, weight, working, at::Tensor());
  return reduce_ ? reduce_(y) : y;
}

at::Tensor LinearImpl::read_bias() const { return bias.defined() && bias_view_ ? bias_view_(bias) : bias; }

void LinearImpl::set_precision(const MixedPrecision& mp) {
  mp_ = mp;
  refresh_working_copy();
}

void LinearImpl::refresh_working_copy() {
  at::NoGradGuard no_grad;
  if (!mp_.enabled()) {
    working = at::Tensor();
  } else if (!working.defined() || working.scalar_type() != mp_.compute || working.device() != weight.device()) {
    working = weight.detach().to(mp_.compute);
  } else {
    working.copy_(weight.detach());
  }
}

}  // namespace dtrain

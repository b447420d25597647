#include "model/connector.h"

namespace dtrain {

ConnectorImpl::ConnectorImpl(int64_t in_features, int64_t out_features) {
  fc1 = register_module("fc1", Linear(in_features, out_features, true));
  fc2 = register_module("fc2", Linear(out_features, out_features, true));
}

at::Tensor ConnectorImpl::forward(const at::Tensor& x) { return fc2(at::gelu(fc1(x), "tanh")); }

void ConnectorImpl::set_precision(const MixedPrecision& mp) {
  fc1->set_precision(mp);
  fc2->set_precision(mp);
}

}  // namespace dtrain

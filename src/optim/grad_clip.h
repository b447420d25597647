// Global gradient-norm clipping (`gradient_clipping`), as torch.nn.utils.clip_grad_norm_.
#pragma once
#include <ATen/ATen.h>

namespace dtrain {

class Group;

// The L2 norm of all gradients. `grads` may be this rank's shard of them: with a `shard_group`
// the squared norms are summed across it first, so every rank gets the norm of the whole model.
double global_grad_norm(const at::Tensor& grads, Group* shard_group = nullptr);

// Scales `grads` by max_norm / (norm + 1e-6) when norm exceeds max_norm (> 0). Returns the factor.
double clip_grads(at::Tensor& grads, double norm, double max_norm);

}  // namespace dtrain

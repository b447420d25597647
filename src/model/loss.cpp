#include "model/loss.h"

#include <torch/nn/functional/loss.h>

#include "model/fused/softmax_cross_entropy.h"

namespace dtrain {

at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& targets) {
  const at::Tensor rows = logits.reshape({-1, logits.size(-1)}), flat_targets = targets.reshape({-1});
  if (fused_cross_entropy_applies(rows, flat_targets)) return fused_cross_entropy(rows, flat_targets);
  return torch::nn::functional::cross_entropy(rows.to(at::kFloat), flat_targets);
}

}  // namespace dtrain

#include "model/loss.h"

#include <torch/nn/functional/loss.h>

namespace dtrain {

at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(at::kFloat), targets.reshape({-1}));
}

}  // namespace dtrain

#include "parallel/zero/sparse_lookup_gradient.h"

#include "model/embedding.h"

namespace dtrain {

void look_up_tokens_with_sparse_gradient(torch::nn::Module& model) {
  for (const auto& item : model.named_modules()) {
    auto* embedding = dynamic_cast<EmbeddingImpl*>(item.value().get());
    if (!embedding || item.key() != "wte") continue;
    embedding->set_lookup([](const at::Tensor& weight, const at::Tensor& tokens) {
      return at::embedding(weight, tokens, /*padding_idx=*/-1, /*scale_grad_by_freq=*/false, /*sparse=*/true);
    });
  }
}

}  // namespace dtrain

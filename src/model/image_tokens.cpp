#include "model/image_tokens.h"

#include <stdexcept>
#include <string>

namespace dtrain {

at::Tensor place_image_tokens(const at::Tensor& embeddings, const at::Tensor& tokens, const at::Tensor& image_tokens, int64_t placeholder) {
  const at::Tensor placeholders = tokens.eq(placeholder).unsqueeze(-1);  // [batch, T, 1]
  const int64_t count = placeholders.sum().item<int64_t>();
  if (count != image_tokens.size(0))
    throw std::invalid_argument("the batch's rows hold " + std::to_string(count) + " image placeholder tokens (id " +
                                std::to_string(placeholder) + ", model.vision.image_token_id) and its images give " +
                                std::to_string(image_tokens.size(0)) + " image tokens: every image token needs its placeholder");
  // masked_scatter fills the positions in row-major order, the order the images come in.
  return embeddings.masked_scatter(placeholders, image_tokens.to(embeddings.scalar_type()));
}

}  // namespace dtrain

// Where a vision-language model's image tokens enter its text: each placeholder token (the id
// model.vision.image_token_id) of the rows takes the next image token, row after row, left to right
// (data/sample_dataset.h's order of images, each image's tokens in its own order).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace dtrain {

// `embeddings` [batch, T, d] of `tokens` [batch, T] with the rows of `image_tokens` [N, d] in place
// of the placeholders' embeddings, in order; the gradient of what was replaced is zero and the image
// tokens get theirs. Throws std::invalid_argument when the rows hold other than N placeholders.
at::Tensor place_image_tokens(const at::Tensor& embeddings, const at::Tensor& tokens, const at::Tensor& image_tokens, int64_t placeholder);

}  // namespace dtrain

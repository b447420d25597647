#include "data/vlm_sample.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {

namespace {

void append_tokens(std::string_view text, Tokenizer* tokenizer, std::vector<int32_t>& out) {
  if (tokenizer) {
    tokenizer->encode(text, out);
  } else {
    for (const char c : text) out.push_back(int32_t(static_cast<unsigned char>(c)));
  }
}

}  // namespace

int64_t image_tokens(const VlmSample& sample, const VlmDataOptions& options) {
  return sample.image == ImageOrigin::None ? 0 : image_tokens(sample.grid, options.image.merge);
}

void place_sample(VlmSample& sample, ImageSize size, std::string_view prompt, const VlmDataOptions& options,
                  Tokenizer* tokenizer) {
  if (sample.image != ImageOrigin::None) {
    sample.image_size = size;
    sample.grid = fit_patch_grid(size.height, size.width, options.image);
  }
  sample.tokens.clear();
  append_tokens(prompt, tokenizer, sample.tokens);
  sample.prompt_tokens = sample.tokens.size();
  append_tokens(sample.text, tokenizer, sample.tokens);
  // The model finds an image's place by its placeholder id: one in the text would take an image token.
  const int64_t placeholder = options.row.image_token_id;
  const auto prompt_end = sample.tokens.begin() + ptrdiff_t(sample.prompt_tokens);
  const bool in_prompt = std::find(sample.tokens.begin(), prompt_end, placeholder) != prompt_end;
  if (in_prompt || std::find(prompt_end, sample.tokens.end(), placeholder) != sample.tokens.end())
    throw std::runtime_error(std::string(in_prompt ? "its prompt" : "its text") + " tokenizes to model.vision.image_token_id " +
                             std::to_string(placeholder) + ", the id of an image placeholder");
  const int64_t images = image_tokens(sample, options);
  const int64_t positions = row_positions(images, sample.tokens.size());
  if (positions > options.row.seq_len + 1)
    throw std::runtime_error("needs " + std::to_string(positions) + " positions (" + std::to_string(images) + " image tokens, " +
                             std::to_string(sample.prompt_tokens) + " prompt, " +
                             std::to_string(sample.tokens.size() - sample.prompt_tokens) + " text, 1 end) but a row of model.seq_len " +
                             std::to_string(options.row.seq_len) + " holds " + std::to_string(options.row.seq_len + 1));
}

}  // namespace dtrain

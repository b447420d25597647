#include "data/vlm_row.h"

#include <stdexcept>
#include <string>

namespace dtrain {

int64_t row_positions(int64_t image_tokens, size_t prompt_and_text_tokens) {
  return image_tokens + int64_t(prompt_and_text_tokens) + 1;
}

void write_row(const RowLayout& layout, int64_t image_tokens, const std::vector<int32_t>& tokens, size_t prompt_tokens,
               int64_t* x, int64_t* y) {
  const int64_t positions = row_positions(image_tokens, tokens.size());
  if (positions > layout.seq_len + 1)
    throw std::logic_error("a sample of " + std::to_string(positions) + " positions was let into a row of model.seq_len " +
                           std::to_string(layout.seq_len));
  const int64_t first_target = image_tokens + int64_t(prompt_tokens);  // the text's first position
  const int64_t end = positions - 1;                                   // the end token's position
  auto token_at = [&](int64_t t) -> int64_t {
    if (t < image_tokens) return layout.image_token_id;
    if (t < end) return tokens[size_t(t - image_tokens)];
    return layout.end_token_id;
  };
  for (int64_t t = 0; t < layout.seq_len; ++t) {
    x[t] = token_at(t);
    y[t] = t + 1 >= first_target && t + 1 <= end ? token_at(t + 1) : kIgnoredTarget;
  }
}

}  // namespace dtrain

// The token row of one vision-language sample, one sample per row of model.seq_len:
//   [image placeholder x image tokens][prompt tokens][text tokens][end] then end tokens as padding.
// The row holds seq_len + 1 positions: x = row[0, seq_len), and y[t] = row[t + 1] where position
// t + 1 holds a text token or the end token, else -100, so the loss covers only what the model must
// produce (the text and where it stops), never the image, the prompt or the padding.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

constexpr int64_t kIgnoredTarget = -100;

struct RowLayout {
  int seq_len = 0;             // model.seq_len
  int64_t image_token_id = 256;  // model.vision.image_token_id: the placeholder an image token replaces
  int64_t end_token_id = 257;    // model.vision.end_token_id: ends the text, pads the row
};

// The positions a sample takes: its image tokens, prompt and text, and the end token. It fits a row
// when this is at most seq_len + 1 (the last position is a target only).
int64_t row_positions(int64_t image_tokens, size_t prompt_and_text_tokens);

// Writes the sample's x and y (seq_len values each). `tokens` holds the prompt's `prompt_tokens` ids,
// then the text's. The sample must fit (row_positions(...) <= seq_len + 1).
void write_row(const RowLayout& layout, int64_t image_tokens, const std::vector<int32_t>& tokens, size_t prompt_tokens,
               int64_t* x, int64_t* y);

}  // namespace dtrain

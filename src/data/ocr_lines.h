// The lines the built-in OCR set renders: lines of the built-in corpus (data/builtin_corpus.h) that
// read as text. Whitespace runs become one space and the ends are trimmed; a line is kept when it is
// printable ASCII (what the renderer draws and the byte tokenizer reads one token a character), its
// length is within bounds (short lines fit a short model.seq_len beside their image), and at least
// half of it is letters (fortune files hold ASCII art and rules of dashes, which teach no reading).
// Each line is kept once, so no line can be both trained on and held out.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

struct OcrLineBounds {
  int min_chars = 8;
  int max_chars = 40;
};

// The lines of `text` kept as above, in the order of their first appearance.
std::vector<std::string> ocr_lines(std::string_view text, OcrLineBounds bounds);

}  // namespace dtrain

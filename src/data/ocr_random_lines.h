// Lines of random characters for the OCR set's training part (data.ocr_random_lines). A line of the
// corpus can mostly be guessed from its first words by a model that has learned the language, so
// corpus lines alone reward a model for writing English before it reads; a random line can only be
// transcribed by reading it. Synthetic strings are how OCR models are commonly trained for this
// reason. Each random line takes the length of a corpus line and draws its characters from the
// characters of the corpus lines (so letters, spaces and punctuation come in the corpus's
// proportions), with no space at either end or after another space, as ocr_lines leaves them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

// `count` lines shaped after `model_lines` (not empty when count > 0), the same for the same `seed`.
std::vector<std::string> random_ocr_lines(const std::vector<std::string>& model_lines, int64_t count, uint64_t seed);

}  // namespace dtrain

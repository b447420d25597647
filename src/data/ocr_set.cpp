#include "data/ocr_set.h"

#include <stdexcept>

#include "common/hash64.h"
#include "data/builtin_corpus.h"
#include "data/hashed_permutation.h"
#include "data/ocr_lines.h"
#include "data/ocr_random_lines.h"

namespace dtrain {

namespace {

// Fixes the OCR set's order, hence which lines are held out.
constexpr uint64_t kOcrOrderKey = 0x4f43522d6c696e65ULL;
// Fixes the random lines (data.ocr_random_lines), apart from the order.
constexpr uint64_t kRandomLinesKey = 0x72616e646f6d6c6eULL;

}  // namespace

uint64_t ocr_render_seed(uint64_t render_seed, const std::string& text) { return splitmix64(render_seed) ^ fnv1a64(text); }

OcrSet build_ocr_set(const VlmDataOptions& options, Tokenizer* tokenizer, const std::string& font_path) {
  OcrSet ocr{{}, std::make_shared<const TextLineRenderer>(font_path)};
  BuiltinCorpus corpus = read_builtin_corpus();
  const std::vector<std::string> corpus_lines = ocr_lines(corpus.text, options.ocr_lines);
  // The random lines come first and are marked training-only, so the corpus lines behind them
  // split into training and held-out lines exactly as they do without any.
  std::vector<std::string> lines = random_ocr_lines(corpus_lines, options.ocr_random_lines, splitmix64(options.render_seed ^ kRandomLinesKey));
  const int64_t random_lines = int64_t(lines.size());
  const HashedPermutation order(int64_t(corpus_lines.size()), kOcrOrderKey);
  for (int64_t i = 0; i < int64_t(corpus_lines.size()); ++i) lines.push_back(corpus_lines[size_t(order(i))]);
  int64_t left_out = 0;
  std::string first_left_out;
  for (int64_t i = 0; i < int64_t(lines.size()); ++i) {
    VlmSample sample;
    sample.text = lines[size_t(i)];
    sample.origin = std::string(i < random_lines ? "random" : "OCR") + " line \"" + sample.text + "\"";
    sample.image = ImageOrigin::RenderedText;
    sample.render_seed = ocr_render_seed(options.render_seed, sample.text);
    try {
      place_sample(sample, ocr.renderer->measure(sample.text, sample.render_seed), "", options, tokenizer);
    } catch (const std::runtime_error& e) {
      if (left_out++ == 0) first_left_out = sample.origin + ": " + e.what();
      continue;
    }
    if (i < random_lines) ++ocr.set.training_only;
    ocr.set.samples.push_back(std::move(sample));
  }
  if (int64_t(ocr.set.samples.size()) == ocr.set.training_only)
    throw std::runtime_error("data.source: no line of the OCR set fits" +
                             (corpus_lines.empty() ? std::string(" (the corpus gave none of the wanted length)") : "; " + first_left_out));
  ocr.set.description = "OCR set: " + std::to_string(ocr.set.samples.size() - size_t(ocr.set.training_only)) + " lines of the " +
                        corpus.name + " (" + corpus.detail + ")" +
                        (ocr.set.training_only ? " and " + std::to_string(ocr.set.training_only) + " lines of random characters (training only)" : "") +
                        " rendered with " + font_path;
  if (left_out) ocr.set.description += "; " + std::to_string(left_out) + " lines left out, the first: " + first_left_out;
  ocr.set.warning = corpus.warning;
  return ocr;
}

}  // namespace dtrain

// data.source "ocr": the built-in OCR set, made offline. Each line of the built-in corpus that reads
// as text (data/ocr_lines.h) becomes a sample whose image is that line rendered through FreeType
// (data/text_line_renderer.h), with an empty prompt and the line as the text to produce.
//
// Lines are put in a fixed pseudo-random order (a permutation keyed by a constant, not by the
// training seed, so the held-out lines are the same in every run) and the last data.val_fraction of
// them is held out: training and validation never share a line, and the held-out lines come from
// every part of the corpus rather than from its last files. Lines whose row would not fit
// model.seq_len are left out and counted: the set is built-in, so a line it cannot use is no error.
//
// Images are rendered when a batch asks for them, not at start: the corpus gives some 20,000 lines,
// whose pixels would cost each rank a few hundred MB, while drawing a line from the renderer's
// glyphs costs well under a millisecond. Load lays each line out (measure) to fix its patch grid.
#pragma once
#include <memory>
#include <string>

#include "data/text_line_renderer.h"
#include "data/tokenizer.h"
#include "data/vlm_data_options.h"
#include "data/vlm_sample.h"

namespace dtrain {

struct OcrSet {
  SampleSet set;  // in the order above: the validation lines last
  std::shared_ptr<const TextLineRenderer> renderer;
};

// Throws std::runtime_error naming the font when it cannot be read, and when no line fits.
OcrSet build_ocr_set(const VlmDataOptions& options, Tokenizer* tokenizer, const std::string& font_path = kDejaVuSansPath);

// The seed of the style `text` is rendered in, given options.render_seed.
uint64_t ocr_render_seed(uint64_t render_seed, const std::string& text);

}  // namespace dtrain

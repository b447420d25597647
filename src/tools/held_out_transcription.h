// How well a vision-language checkpoint reads: held-out samples of the data its run trained on (the
// validation split of its data.source, "ocr" for the built-in OCR set) transcribed greedily and set
// beside their text, with the character accuracy of each and of all.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "tools/image_transcription.h"

namespace dtrain {

// Levenshtein distance between two texts, in Unicode code points (a byte that is not UTF-8 counts as one).
int64_t edit_distance(const std::string& truth, const std::string& got);
// Code points in `text`, counted as edit_distance counts them.
int64_t code_points(const std::string& text);

struct TranscriptionScore {
  int64_t samples = 0, characters = 0, errors = 0;  // characters of the truths; their edit distances, summed
  double accuracy() const { return characters > 0 ? 1.0 - double(errors) / double(characters) : 0.0; }
};

// Transcribes `count` samples spread evenly over the validation split (all of them when it has fewer),
// writing each one's truth and transcription to `out`, then the total. `tokenizer` tokenizes the
// dataset as the run did (null: bytes). Throws std::runtime_error when the split is empty.
TranscriptionScore transcribe_held_out(ImageTranscriber& transcriber, Tokenizer* tokenizer, int64_t count,
                                       const SamplingOptions& options, std::ostream& out);

}  // namespace dtrain

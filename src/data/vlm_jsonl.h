// data.source "vlm:FILE.jsonl": one sample per line, a JSON object
//   {"image": "scans/0001.png", "prompt": "Transcribe:", "text": "the words in the image"}
// "text" is required; "prompt" defaults to ""; "image", a path relative to the jsonl's folder (or
// absolute), may be left out for a text-only sample. Other keys are ignored (datasets carry ids and
// metadata), and blank lines are skipped.
//
// Every sample is checked here, when the dataset loads, so that a run never starts on one it would
// fail on later: its image is decoded in full (a truncated file passes a header check and fails
// only in the decoder) and its row is laid out. A bad sample (not JSON, no "text", a key of the wrong
// type, an image missing, undecodable or above data.max_image_pixels, a row past model.seq_len) is a
// std::runtime_error naming the jsonl file and line, or, under data.skip_bad_samples, left out and
// counted. The decoded pixels are not kept: a batch decodes its images again.
#pragma once
#include <string>

#include "data/tokenizer.h"
#include "data/vlm_data_options.h"
#include "data/vlm_sample.h"

namespace dtrain {

// Throws std::runtime_error naming data.source and the file when it cannot be read, or the file and
// line of a bad sample (unless options.skip_bad_samples).
SampleSet read_vlm_jsonl(const std::string& path, const VlmDataOptions& options, Tokenizer* tokenizer);

}  // namespace dtrain

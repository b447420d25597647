// Autoregressive sampling from a Transformer: temperature, top-k, a seed of its own.
#pragma once
#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace dtrain {

struct SamplingOptions {
  int64_t new_tokens = 200;
  double temperature = 0.8;  // 0: greedy
  int64_t top_k = 40;        // 0: the whole vocabulary
  uint64_t seed = 0;
  std::vector<int64_t> stop_tokens;  // sampling ends at any of these, which is not returned
};

// Continues `prompt` (token ids) by new_tokens, feeding at most seq_len tokens of context. A
// vision-language model takes `images`, whose placeholders the prompt holds: the context cannot slide
// past them, so sampling then ends when the row of seq_len tokens is full.
std::vector<int64_t> sample_tokens(Transformer& model, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                                   const ImageBatch& images = {});

}  // namespace dtrain

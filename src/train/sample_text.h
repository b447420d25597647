// Text in, text out over a checkpoint: bytes are tokens (the built-in corpus and text: sources).
#pragma once
#include <string>

#include "model/sampling.h"

namespace dtrain {

// `path` is a step directory or a checkpoint.dir holding several; returns the intact step
// directory to use, or throws saying why there is none.
std::string resolve_checkpoint_dir(const std::string& path);
// The continuation of `prompt` sampled from the checkpoint's model. Bytes the terminal cannot show
// are printed as '?'.
std::string sample_text(const std::string& checkpoint_dir, const std::string& prompt, const SamplingOptions& options);

}  // namespace dtrain

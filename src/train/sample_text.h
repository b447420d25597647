// Text in, text out over a checkpoint, through the tokenizer its run trained with (data.tokenizer, as
// its config.json records it; bytes are tokens when the run had none).
#pragma once
#include <string>

#include "data/tokenizer.h"
#include "model/sampling.h"

namespace dtrain {

// `path` is a step directory or a checkpoint.dir holding several; returns the intact step
// directory to use, or throws saying why there is none.
std::string resolve_checkpoint_dir(const std::string& path);
// Throws std::invalid_argument naming --prompt when no sample can start from it; the commands call
// it before any work, so that a run does not train only to fail at its sample.
void check_prompt(const std::string& prompt);
// `path` when it is not empty, else the tokenizer the checkpoint's config.json names (data.tokenizer).
// Throws std::runtime_error naming the file when it cannot be read.
std::unique_ptr<Tokenizer> checkpoint_tokenizer(const std::string& checkpoint_dir, const std::string& path);
// `prompt` and its continuation sampled from the checkpoint's model, ready for the terminal: line
// breaks kept, control characters and bytes that are not UTF-8 written as \xNN (the model writes
// whatever bytes its data held). Throws std::invalid_argument when the tokenizer makes ids past the
// model's vocabulary.
std::string sample_text(const std::string& checkpoint_dir, const std::string& prompt, const SamplingOptions& options,
                        Tokenizer& tokenizer);

}  // namespace dtrain

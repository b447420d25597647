// Where tokens come from (data.source): "builtin" (English text from Debian's fortunes package, one
// byte per token, with a synthetic fallback when the package is missing), "text:PATH" (a raw text
// file, bytes as tokens) or "bin:GLOB" (nanoGPT/llm.c uint16 token shards, with or without llm.c's
// 1 KiB header). Files are mapped, not read (data/token_stream.h): a corpus of any size costs a
// rank no memory of its own.
#pragma once
#include <string>

#include "data/token_stream.h"

namespace dtrain {

struct TokenSource {
  TokenStream tokens;
  std::string description;  // for logs: what was read and how much
  std::string warning;      // non-empty when a fallback was taken
};

// Throws std::runtime_error naming data.source and the file at fault.
TokenSource load_tokens(const std::string& source);

// Where "builtin" reads from: $DTRAIN_FORTUNES_DIR, else /usr/share/games/fortunes.
std::string builtin_corpus_dir();

}  // namespace dtrain

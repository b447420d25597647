// Where tokens come from (data.source): "builtin" (English text from Debian's fortunes package, one
// byte per token, with a synthetic fallback when the package is missing), "text:PATH" (a raw text
// file, bytes as tokens) or "bin:GLOB" (nanoGPT/llm.c uint16 token shards, with or without llm.c's
// 1 KiB header, or llm.c's uint32 shards for vocabularies past 65536: data/token_shard_format.h). Files are mapped, not read (data/token_stream.h): a corpus of any size costs a
// rank no memory of its own.
#pragma once
#include <string>

#include "data/builtin_corpus.h"  // builtin_corpus_dir(): where "builtin" reads from
#include "data/token_stream.h"
#include "data/tokenizer.h"

namespace dtrain {

struct TokenSource {
  TokenStream tokens;
  std::string description;  // for logs: what was read and how much
  std::string warning;      // non-empty when a fallback was taken
};

// Throws std::runtime_error naming data.source and the file at fault. Text ("builtin", "text:") is
// tokenized by `tokenizer` when one is given (data.tokenizer), in memory at the narrowest width that
// holds its ids: that costs each rank 2 or 4 bytes a token and the tokenizing time at every start,
// which `dtrain prepare` pays once for a large corpus, writing bin: shards.
TokenSource load_tokens(const std::string& source, Tokenizer* tokenizer = nullptr);

}  // namespace dtrain

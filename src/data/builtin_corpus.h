// The text of data.source "builtin": English from Debian's fortunes package, with a synthetic fallback
// when the package is missing, so a machine without it still trains on something with structure.
// Read by the text source (data/token_source.h, one byte per token) and by the OCR set, which renders
// its lines (data/ocr_lines.h).
#pragma once
#include <string>

namespace dtrain {

struct BuiltinCorpus {
  std::string text;
  std::string name;     // for logs: "built-in corpus" or "built-in synthetic corpus"
  std::string detail;   // for logs: how much was read, e.g. "431 fortune files, 4.5 MB"
  std::string warning;  // non-empty when the synthetic fallback was taken
};

// Throws std::runtime_error naming data.source and a fortune file that cannot be read.
BuiltinCorpus read_builtin_corpus();

// Where the corpus is read from: $DTRAIN_FORTUNES_DIR, else /usr/share/games/fortunes.
std::string builtin_corpus_dir();

}  // namespace dtrain

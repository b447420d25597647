// A SentencePiece model (Llama 2's tokenizer.model) through Debian's libsentencepiece: the same
// library the reference Python package wraps, so its ids are the reference's by construction (the
// tests check them all the same, byte fallback included).
#pragma once
#include <memory>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace dtrain {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws std::runtime_error with SentencePiece's own reason when `path` is not a model it reads.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  void encode(std::string_view text, std::vector<int32_t>& out) override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string description() const override;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace dtrain

// Text to token ids and back (data.tokenizer): the tokenizer a model was trained with, read from the
// file its checkpoint ships. Without one, bytes are tokens, as dtrain has always trained on text.
//   - tokenizer.json: Hugging Face's byte-level BPE, as GPT-2 and Llama 3 ship it
//     (data/byte_level_bpe.h, checked id for id against the `tokenizers` library).
//   - tokenizer.model: a SentencePiece model, as Llama 2 ships it, through Debian's libsentencepiece.
// Encoding adds no special tokens (no BOS, no EOS): the ids are those of the reference libraries'
// encode(text, add_special_tokens=False), a document's text and nothing else.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Appends the ids of `text` to `out`. Not for concurrent use: a tokenizer may cache what it saw.
  virtual void encode(std::string_view text, std::vector<int32_t>& out) = 0;
  // The text of `ids`; an id the tokenizer does not have reads as U+FFFD.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // One past the largest id it produces: the model's vocab_size must be at least this.
  virtual int64_t vocab_size() const = 0;
  // For logs, e.g. "byte-level BPE tokenizer.json (50257 tokens)".
  virtual std::string description() const = 0;
};

// The tokenizer in `path` (a tokenizer.json, or a SentencePiece model: told apart by content), or the
// byte tokenizer when `path` is empty. Throws std::runtime_error naming the file and what is wrong.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Throws std::invalid_argument when `tokenizer` makes ids that a model of `vocab_size` has no row for.
// `model_key` names where that size came from ("model.vocab_size", "the checkpoint's model").
void require_vocab_fits(const Tokenizer& tokenizer, int64_t vocab_size, const std::string& model_key);

}  // namespace dtrain

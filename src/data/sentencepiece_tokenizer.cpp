#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <stdexcept>

#include "common/printable.h"

namespace dtrain {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : path_(path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (const auto status = processor_->Load(path); !status.ok())
    throw std::runtime_error("is neither a tokenizer.json nor a SentencePiece model SentencePiece can read (" + status.ToString() + ")");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::encode(std::string_view text, std::vector<int32_t>& out) {
  std::vector<int> ids;
  if (const auto status = processor_->Encode(text, &ids); !status.ok())
    throw std::runtime_error("SentencePiece model '" + printable(path_) + "' cannot encode: " + status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  // Ids the model lacks (a model's vocab_size may be padded past the tokenizer's) read as U+FFFD,
  // as the byte-level tokenizer writes them; SentencePiece would refuse the whole sequence.
  std::string text;
  std::vector<int> run;
  const auto flush = [&] {
    std::string piece;
    if (!run.empty() && processor_->Decode(run, &piece).ok()) text += piece;
    run.clear();
  };
  for (const int64_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      run.push_back(int(id));
    } else {
      flush();
      text += "\xEF\xBF\xBD";
    }
  }
  flush();
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::string SentencePieceTokenizer::description() const {
  return "SentencePiece " + printable(path_) + " (" + std::to_string(vocab_size()) + " tokens)";
}

}  // namespace dtrain

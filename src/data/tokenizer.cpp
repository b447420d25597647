#include "data/tokenizer.h"

#include <cctype>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/printable.h"
#include "common/regular_file.h"
#include "data/byte_level_bpe.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_json.h"

namespace dtrain {

namespace {

// Bytes are tokens: the text sources' tokenizer when none is named.
class ByteTokenizer : public Tokenizer {
 public:
  void encode(std::string_view text, std::vector<int32_t>& out) override {
    for (const char c : text) out.push_back(uint8_t(c));
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (const int64_t id : ids) text += id >= 0 && id < 256 ? std::string(1, char(id)) : "\xEF\xBF\xBD";
    return text;
  }
  int64_t vocab_size() const override { return 256; }
  std::string description() const override { return "bytes as tokens"; }
};

bool starts_like_json(const std::string& bytes) {
  for (const char c : bytes)
    if (!std::isspace(uint8_t(c))) return c == '{';
  return false;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path.empty()) return std::make_unique<ByteTokenizer>();
  const std::string file = "tokenizer '" + printable(path) + "' ";
  FileContents contents = read_regular_file(path);
  if (!contents.problem.empty()) throw std::runtime_error(file + contents.problem);
  try {
    if (!starts_like_json(contents.bytes)) return std::make_unique<SentencePieceTokenizer>(path);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(contents.bytes);
    } catch (const nlohmann::json::parse_error& e) {
      throw std::runtime_error(std::string("is not valid JSON: ") + e.what());
    }
    return std::make_unique<ByteLevelBpe>(byte_level_bpe_spec(json), printable(path));
  } catch (const std::invalid_argument& e) {  // a field at fault, which the message names
    throw std::runtime_error(file.substr(0, file.size() - 1) + ": " + e.what());
  } catch (const std::runtime_error& e) {  // the file as a whole: "is not valid JSON: ..."
    throw std::runtime_error(file + e.what());
  }
}

void require_vocab_fits(const Tokenizer& tokenizer, int64_t vocab_size, const std::string& model_key) {
  if (tokenizer.vocab_size() > vocab_size)
    throw std::invalid_argument("the tokenizer (" + tokenizer.description() + ") makes ids up to " +
                                std::to_string(tokenizer.vocab_size() - 1) + ", past " + model_key + " " +
                                std::to_string(vocab_size) + ": the model has no embedding row for them");
}

}  // namespace dtrain

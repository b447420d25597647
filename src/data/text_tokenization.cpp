#include "data/text_tokenization.h"

#include <algorithm>

namespace dtrain {

namespace {

// Where the chunk that starts at `from` ends: the first line start at or past from + chunk_bytes
// whose first byte is printable ASCII, or the end of the text.
size_t chunk_end(std::string_view text, size_t from, size_t chunk_bytes) {
  for (size_t at = std::max(from + chunk_bytes, from + 1); at < text.size(); ++at)
    if (text[at - 1] == '\n' && text[at] > ' ' && text[at] < 0x7F) return at;
  return text.size();
}

}  // namespace

void tokenize_text(std::string_view text, Tokenizer& tokenizer,
                   const std::function<void(const std::vector<int32_t>&, size_t)>& sink, size_t chunk_bytes) {
  std::vector<int32_t> ids;
  for (size_t from = 0; from < text.size();) {
    const size_t end = chunk_end(text, from, chunk_bytes);
    ids.clear();
    tokenizer.encode(text.substr(from, end - from), ids);
    sink(ids, end);
    from = end;
  }
}

}  // namespace dtrain

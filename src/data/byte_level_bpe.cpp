#include "data/byte_level_bpe.h"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

namespace dtrain {

namespace {

constexpr size_t kCacheEntries = size_t(1) << 17;

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6)), s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xE0 | (c >> 12)), s += char(0x80 | ((c >> 6) & 0x3F)), s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// Printable Latin-1 bytes spell themselves; the others (controls, space, 0x7F-0xA0, 0xAD) take the
// code points from U+0100 on, in byte order.
std::array<std::string, 256> make_byte_chars() {
  std::array<std::string, 256> chars;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    chars[size_t(b)] = utf8(printable ? char32_t(b) : next++);
  }
  return chars;
}

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

// The bytes a vocabulary entry stands for: each of its characters mapped back to its byte. An entry
// with characters outside the byte alphabet (none in a byte-level vocabulary) keeps them as they are.
std::string entry_bytes(const std::string& entry, const std::unordered_map<std::string, uint8_t>& byte_of) {
  std::string bytes;
  for (size_t at = 0; at < entry.size();) {
    const uint8_t lead = uint8_t(entry[at]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const std::string ch = entry.substr(at, n);
    const auto it = byte_of.find(ch);
    if (it == byte_of.end()) return entry;
    bytes += char(it->second);
    at += n;
  }
  return bytes;
}

}  // namespace

const std::string& byte_level_char(uint8_t b) {
  static const std::array<std::string, 256> chars = make_byte_chars();
  return chars[b];
}

ByteLevelBpe::ByteLevelBpe(const ByteLevelBpeSpec& spec, std::string name)
    : name_(std::move(name)), split_(spec.split), add_prefix_space_(spec.add_prefix_space), ignore_merges_(spec.ignore_merges) {
  if (spec.ignore_merges) vocab_ = spec.vocab;
  int64_t size = 0;
  for (const auto& [entry, id] : spec.vocab) size = std::max(size, int64_t(id) + 1);
  for (const auto& [content, id] : spec.added_tokens) size = std::max(size, int64_t(id) + 1);
  std::unordered_map<std::string, uint8_t> byte_of;
  for (int b = 0; b < 256; ++b) {
    byte_of[byte_level_char(uint8_t(b))] = uint8_t(b);
    const auto it = spec.vocab.find(byte_level_char(uint8_t(b)));
    if (it == spec.vocab.end())
      throw std::invalid_argument("model.vocab has no entry for byte " + std::to_string(b) + " (\"" + byte_level_char(uint8_t(b)) +
                                  "\"): a byte-level vocabulary spells every byte");
    byte_symbol_[b] = it->second;
  }
  token_bytes_.assign(size_t(size), std::string());
  std::vector<bool> has_token(size_t(size), false);
  for (const auto& [entry, id] : spec.vocab) {
    if (id < 0) throw std::invalid_argument("model.vocab gives \"" + entry + "\" the negative id " + std::to_string(id));
    token_bytes_[size_t(id)] = entry_bytes(entry, byte_of);
    has_token[size_t(id)] = true;
  }
  for (const auto& [content, id] : spec.added_tokens) {
    if (id < 0 || content.empty()) throw std::invalid_argument("added_tokens holds \"" + content + "\" with id " + std::to_string(id));
    token_bytes_[size_t(id)] = content;
    has_token[size_t(id)] = true;
    added_.emplace_back(content, id);
    added_first_byte_[uint8_t(content[0])] = true;
  }
  for (size_t id = 0; id < has_token.size(); ++id)
    if (!has_token[id]) token_bytes_[id] = "\xEF\xBF\xBD";  // a hole in the ids: U+FFFD, as for ids past the end
  std::stable_sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const auto l = spec.vocab.find(left), r = spec.vocab.find(right), m = spec.vocab.find(left + right);
    if (l == spec.vocab.end() || r == spec.vocab.end() || m == spec.vocab.end())
      throw std::invalid_argument("model.merges[" + std::to_string(rank) + "] (\"" + left + " " + right + "\") merges " +
                                  (l == spec.vocab.end() ? "\"" + left + "\", which is not in model.vocab"
                                   : r == spec.vocab.end() ? "\"" + right + "\", which is not in model.vocab"
                                                           : "into \"" + left + right + "\", which is not in model.vocab"));
    merges_.emplace(pair_key(l->second, r->second), Merge{int32_t(rank), m->second});  // a repeated pair keeps its first rank
  }
}

std::string ByteLevelBpe::description() const {
  return "byte-level BPE " + name_ + " (" + std::to_string(vocab_size()) + " tokens)";
}

size_t ByteLevelBpe::next_added_token(std::string_view text, size_t from, size_t& length, int32_t& id) const {
  if (added_.empty()) return text.size();
  for (size_t at = from; at < text.size(); ++at) {
    if (!added_first_byte_[uint8_t(text[at])]) continue;
    for (const auto& [content, token] : added_) {
      if (text.compare(at, content.size(), content) == 0) {
        length = content.size(), id = token;
        return at;
      }
    }
  }
  return text.size();
}

void ByteLevelBpe::encode(std::string_view text, std::vector<int32_t>& out) {
  for (size_t from = 0; from < text.size();) {
    size_t length = 0;
    int32_t id = 0;
    const size_t at = next_added_token(text, from, length, id);
    encode_segment(text.substr(from, at - from), out);
    if (at == text.size()) break;
    out.push_back(id);
    from = at + length;
  }
}

void ByteLevelBpe::encode_segment(std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::string prefixed;
  if (add_prefix_space_ && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  pieces_.clear();
  split_pretokens(text, split_, pieces_);
  for (const std::string_view piece : pieces_) encode_pretoken(piece, out);
}

void ByteLevelBpe::encode_pretoken(std::string_view piece, std::vector<int32_t>& out) {
  const std::string key(piece);
  if (const auto hit = cache_.find(key); hit != cache_.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  std::vector<int32_t> symbols;
  if (ignore_merges_) {
    std::string spelled;
    for (const char b : piece) spelled += byte_level_char(uint8_t(b));
    if (const auto whole = vocab_.find(spelled); whole != vocab_.end()) symbols.push_back(whole->second);
  }
  if (symbols.empty()) {
    for (const char b : piece) symbols.push_back(byte_symbol_[uint8_t(b)]);
    while (symbols.size() > 1) {
      int32_t best_rank = std::numeric_limits<int32_t>::max(), result = 0;
      size_t best = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto m = merges_.find(pair_key(symbols[i], symbols[i + 1]));
        if (m != merges_.end() && m->second.rank < best_rank) best_rank = m->second.rank, result = m->second.result, best = i;
      }
      if (best_rank == std::numeric_limits<int32_t>::max()) break;
      symbols[best] = result;
      symbols.erase(symbols.begin() + std::ptrdiff_t(best) + 1);
    }
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cache_.size() < kCacheEntries) cache_.emplace(key, std::move(symbols));
}

std::string ByteLevelBpe::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (const int64_t id : ids) text += id >= 0 && id < vocab_size() ? token_bytes_[size_t(id)] : "\xEF\xBF\xBD";
  return text;
}

}  // namespace dtrain

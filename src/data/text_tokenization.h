// Tokenizing a corpus a chunk at a time, so that neither the text's pre-tokens nor its ids need to be
// held whole. Chunks end at a line break followed by a printable ASCII character: GPT-2's and Llama
// 3's splits never join a line break to what follows it, so byte-level BPE gives the ids of the
// whole text. SentencePiece starts each chunk as it starts any text (its dummy prefix "▁"), which
// changes the ids at chunk starts only, about once per MiB.
#pragma once
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace dtrain {

constexpr size_t kTokenizeChunkBytes = size_t(1) << 20;

// Calls `sink(ids, bytes_done)` after each chunk with that chunk's ids and the bytes tokenized so far.
void tokenize_text(std::string_view text, Tokenizer& tokenizer,
                   const std::function<void(const std::vector<int32_t>& ids, size_t bytes_done)>& sink,
                   size_t chunk_bytes = kTokenizeChunkBytes);

}  // namespace dtrain

// The first step of byte-level BPE: cutting text into the pieces ("pre-tokens") that merges never
// cross, by the regular expressions GPT-2 and Llama 3 ship, written out by hand as scanners over code
// points. Each scanner takes, at every position, the first alternative of its pattern that matches
// there, each alternative as long as the regex engine's greedy match: the pieces are those the
// reference tokenizers' Oniguruma regex finds.
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//            \s*[\r\n]+|\s+(?!\S)|\s+
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

enum class SplitPattern { Gpt2, Llama3 };

// The pattern whose regex source (as tokenizer.json spells it) is `regex`; false when it is neither.
bool split_pattern_of(const std::string& regex, SplitPattern& out);

// Appends `text`'s pieces, in order, to `out`: together they are `text`.
void split_pretokens(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& out);

}  // namespace dtrain

#include "data/tokenizer_json.h"

#include <stdexcept>

namespace dtrain {

namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument(what); }

const json& field(const json& object, const char* key, const std::string& where) {
  if (!object.is_object() || !object.contains(key)) refuse(where + " has no \"" + key + "\"");
  return object.at(key);
}

std::string type_of(const json& object) { return object.is_object() ? object.value("type", std::string()) : std::string(); }

// ByteLevel as a pre-tokenizer; `split` tells whether its own GPT-2 split is wanted.
void read_byte_level(const json& p, const std::string& where, bool split, ByteLevelBpeSpec& spec) {
  if (p.value("use_regex", true) != split)
    refuse(where + ".use_regex is " + (split ? "false" : "true") + (split ? ": a ByteLevel pre-tokenizer alone must split text itself"
                                                                          : ": the text is already split before it"));
  spec.add_prefix_space = p.value("add_prefix_space", false);
}

void read_pre_tokenizer(const json& p, ByteLevelBpeSpec& spec) {
  const std::string type = type_of(p);
  if (type == "ByteLevel") return read_byte_level(p, "pre_tokenizer", true, spec), void(spec.split = SplitPattern::Gpt2);
  const json& steps = type == "Sequence" ? field(p, "pretokenizers", "pre_tokenizer") : json();
  if (!steps.is_array() || steps.size() != 2 || type_of(steps[0]) != "Split" || type_of(steps[1]) != "ByteLevel")
    refuse("pre_tokenizer is " + (type.empty() ? std::string("missing") : "of type \"" + type + "\"") +
           ": dtrain reads byte-level BPE, whose pre_tokenizer is ByteLevel, or a Sequence of a Split and a ByteLevel");
  const json& split = steps[0];
  const json& pattern = field(split, "pattern", "pre_tokenizer.pretokenizers[0]");
  const std::string regex = pattern.is_object() && pattern.contains("Regex") ? pattern["Regex"].get<std::string>() : std::string();
  if (!split_pattern_of(regex, spec.split))
    refuse("pre_tokenizer.pretokenizers[0].pattern " + pattern.dump() + " is not GPT-2's or Llama 3's split, the two dtrain implements");
  if (split.value("behavior", std::string()) != "Isolated" || split.value("invert", false))
    refuse("pre_tokenizer.pretokenizers[0] must isolate its matches (behavior \"Isolated\", invert false)");
  read_byte_level(steps[1], "pre_tokenizer.pretokenizers[1]", false, spec);
}

void read_model(const json& model, ByteLevelBpeSpec& spec) {
  if (const std::string type = type_of(model); type != "BPE")
    refuse("model.type is \"" + type + "\"; dtrain reads byte-level BPE (\"BPE\") from a tokenizer.json");
  if (!model.value("dropout", json()).is_null()) refuse("model.dropout is set: BPE dropout samples ids, a data set needs them fixed");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      refuse(std::string("model.") + key + " is set, which byte-level BPE does not use");
  if (model.value("byte_fallback", false)) refuse("model.byte_fallback is true, which byte-level BPE does not use");
  spec.ignore_merges = model.value("ignore_merges", false);
  const json& vocab = field(model, "vocab", "model");
  if (!vocab.is_object()) refuse("model.vocab is not an object of token -> id");
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer()) refuse("model.vocab[\"" + token + "\"] is not an integer id");
    spec.vocab.emplace(token, id.get<int32_t>());
  }
  const json& merges = field(model, "merges", "model");
  if (!merges.is_array()) refuse("model.merges is not a list");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {  // "left right", as tokenizers before 0.20 wrote them
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos) refuse("model.merges[" + std::to_string(i) + "] (\"" + s + "\") is not two tokens apart by a space");
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      refuse("model.merges[" + std::to_string(i) + "] is neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
}

void read_added_tokens(const json& added, ByteLevelBpeSpec& spec) {
  if (added.is_null()) return;
  if (!added.is_array()) refuse("added_tokens is not a list");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& t = added[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    const json& content = field(t, "content", where);
    const json& id = field(t, "id", where);
    if (!content.is_string() || !id.is_number_integer()) refuse(where + " needs a string content and an integer id");
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      if (t.value(flag, false)) refuse(where + " (\"" + content.get<std::string>() + "\") sets " + flag + ", which dtrain does not implement");
    spec.added_tokens.emplace_back(content.get<std::string>(), id.get<int32_t>());
  }
}

}  // namespace

ByteLevelBpeSpec byte_level_bpe_spec(const json& file) {
  if (!file.is_object()) refuse("the file is not a JSON object");
  ByteLevelBpeSpec spec;
  if (!file.value("normalizer", json()).is_null())
    refuse("normalizer is of type \"" + type_of(file["normalizer"]) + "\"; byte-level BPE reads text as it is (normalizer null)");
  read_model(field(file, "model", "the file"), spec);
  read_pre_tokenizer(file.value("pre_tokenizer", json()), spec);
  if (const json decoder = file.value("decoder", json()); !decoder.is_null() && type_of(decoder) != "ByteLevel")
    refuse("decoder is of type \"" + type_of(decoder) + "\"; byte-level BPE decodes with ByteLevel");
  read_added_tokens(file.value("added_tokens", json()), spec);
  return spec;
}

}  // namespace dtrain

#include "train/sample_text.h"

#include <iostream>
#include <limits>
#include <sstream>

#include "ckpt/checkpoint_manager.h"
#include "common/printable.h"
#include "common/regular_file.h"
#include "train/training_state.h"

namespace dtrain {

namespace {

// printable() line by line, so that a sample keeps its line breaks.
std::string printable_lines(const std::string& text) {
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) out += printable(line, std::numeric_limits<size_t>::max()) + "\n";
  if (!text.empty() && text.back() != '\n') out.pop_back();
  return out;
}

}  // namespace

std::string resolve_checkpoint_dir(const std::string& path) {
  std::vector<std::string> warnings;
  std::optional<CheckpointInfo> found;
  try {
    // The checkpoint must fit the config its own metadata describes; checked without reading the weights.
    found = CheckpointManager::resolve(path, check_model, &warnings);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("checkpoint ") + e.what());
  }
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  if (!found) throw std::runtime_error("no intact checkpoint in '" + printable(path) + "'");
  return found->dir;
}

void check_prompt(const std::string& prompt) {
  if (prompt.empty()) throw std::invalid_argument("--prompt must hold at least one character: sampling continues a text");
}

std::unique_ptr<Tokenizer> checkpoint_tokenizer(const std::string& checkpoint_dir, const std::string& path) {
  if (!path.empty()) return load_tokenizer(path);
  const FileContents config = read_regular_file(checkpoint_dir + "/config.json");
  std::string recorded;
  if (config.problem.empty()) {
    const nlohmann::json recorded_config = nlohmann::json::parse(config.bytes, nullptr, false);
    const nlohmann::json::json_pointer key("/data/tokenizer");
    if (!recorded_config.is_discarded() && recorded_config.contains(key) && recorded_config[key].is_string())
      recorded = recorded_config[key].get<std::string>();
  }
  try {
    return load_tokenizer(recorded);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (the checkpoint's data.tokenizer; --tokenizer names another)");
  }
}

std::string sample_text(const std::string& checkpoint_dir, const std::string& prompt, const SamplingOptions& options,
                        Tokenizer& tokenizer) {
  check_prompt(prompt);
  Transformer model = load_model(checkpoint_dir);
  require_vocab_fits(tokenizer, model->config().vocab_size, "the checkpoint's model.vocab_size");
  std::vector<int32_t> ids;
  tokenizer.encode(prompt, ids);
  if (ids.empty()) throw std::invalid_argument("--prompt encodes to no token: sampling continues a text");
  std::vector<int64_t> tokens(ids.begin(), ids.end());
  const std::vector<int64_t> sampled = sample_tokens(model, tokens, options);
  tokens.insert(tokens.end(), sampled.begin(), sampled.end());
  return printable_lines(tokenizer.decode(tokens));
}

}  // namespace dtrain

#include "train/sample_text.h"

#include <iostream>
#include <limits>
#include <sstream>

#include "ckpt/checkpoint_manager.h"
#include "common/printable.h"
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
    // Loading the model proves the checkpoint fits the config its own metadata describes.
    found = CheckpointManager::resolve(path, [](const std::string& dir) { load_model(dir); }, &warnings);
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

std::string sample_text(const std::string& checkpoint_dir, const std::string& prompt, const SamplingOptions& options) {
  check_prompt(prompt);
  Transformer model = load_model(checkpoint_dir);
  std::vector<int64_t> tokens(prompt.begin(), prompt.end());
  for (auto& t : tokens) {
    t = static_cast<unsigned char>(t);
    if (t >= model->config().vocab_size)
      throw std::invalid_argument("--prompt holds byte " + std::to_string(t) + ", outside the model's vocabulary of " +
                                  std::to_string(model->config().vocab_size) + " tokens");
  }
  std::string text = prompt;
  for (int64_t t : sample_tokens(model, tokens, options)) text += t < 256 ? char(t) : '?';  // a larger token is no byte
  return printable_lines(text);
}

}  // namespace dtrain

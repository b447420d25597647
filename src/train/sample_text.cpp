#include "train/sample_text.h"

#include <filesystem>
#include <iostream>

#include "ckpt/checkpoint_manager.h"
#include "train/training_state.h"

namespace dtrain {

std::string resolve_checkpoint_dir(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    throw std::runtime_error("checkpoint '" + path + "' " + (std::filesystem::exists(path, ec) ? "is not a directory" : "does not exist"));
  if (std::filesystem::exists(path + "/manifest.json", ec)) {
    CheckpointManager::verify(path);
    return path;
  }
  CheckpointOptions options;
  options.dir = path;
  std::vector<std::string> warnings;
  // Loading the model proves the checkpoint fits the config its own metadata describes.
  auto found = CheckpointManager(options, 0, [] {}).find_resumable([](const std::string& dir) { load_model(dir); }, &warnings);
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  if (!found) throw std::runtime_error("no intact checkpoint in '" + path + "'");
  return found->dir;
}

std::string sample_text(const std::string& checkpoint_dir, const std::string& prompt, const SamplingOptions& options) {
  Transformer model = load_model(checkpoint_dir);
  std::vector<int64_t> tokens(prompt.begin(), prompt.end());
  for (auto& t : tokens) t = static_cast<unsigned char>(t);
  std::string text;
  for (int64_t t : sample_tokens(model, tokens, options)) {
    const bool printable = t == '\n' || t == '\t' || (t >= 32 && t < 256);
    text += printable ? char(t) : '?';
  }
  return text;
}

}  // namespace dtrain

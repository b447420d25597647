#include "tools/generate_command.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "common/printable.h"
#include "train/sample_text.h"

namespace dtrain {

int generate_command(int argc, char** argv) {
  std::string checkpoint, tokenizer_path, prompt = "The ";
  SamplingOptions options;
  CLI::App app{"Sample text from a checkpoint (a step directory, or a checkpoint.dir: its newest intact checkpoint).",
               "dtrain generate"};
  app.add_option("--checkpoint", checkpoint, "checkpoint directory")->required();
  app.add_option("--prompt", prompt, "text to continue")->capture_default_str();
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json or SentencePiece model (default: the one the checkpoint's run named in data.tokenizer)");
  app.add_option("--tokens", options.new_tokens, "tokens to generate")->check(whole_number(1, int64_t(1) << 20))->capture_default_str();
  app.add_option("--temperature", options.temperature, "softmax temperature; 0 is greedy")->check(real_number(0))->capture_default_str();
  app.add_option("--top-k", options.top_k, "sample among the k likeliest tokens; 0 for all")->check(whole_number(0))->capture_default_str();
  // CLI11 reads "-1" into an unsigned seed as 2^64-1 without a word.
  app.add_option("--seed", options.seed, "sampling seed")->check(whole_number(0))->capture_default_str();
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  const std::string dir = resolve_checkpoint_dir(checkpoint);
  std::cerr << "generate: " << printable(dir) << "\n";
  const std::unique_ptr<Tokenizer> tokenizer = checkpoint_tokenizer(dir, tokenizer_path);
  std::cerr << "generate: tokenizer: " << tokenizer->description() << "\n";
  std::cout << sample_text(dir, prompt, options, *tokenizer) << std::endl;
  return 0;
}

}  // namespace dtrain

#include "tools/generate_command.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "train/sample_text.h"

namespace dtrain {

int generate_command(int argc, char** argv) {
  std::string checkpoint, prompt = "The ";
  SamplingOptions options;
  CLI::App app{"Sample text from a checkpoint (a step directory, or a checkpoint.dir: its newest intact checkpoint).",
               "dtrain generate"};
  app.add_option("--checkpoint", checkpoint, "checkpoint directory")->required();
  app.add_option("--prompt", prompt, "text to continue")->capture_default_str();
  app.add_option("--tokens", options.new_tokens, "tokens to generate")->check(CLI::Range(int64_t(1), int64_t(1) << 20))->capture_default_str();
  app.add_option("--temperature", options.temperature, "softmax temperature; 0 is greedy")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--top-k", options.top_k, "sample among the k likeliest tokens; 0 for all")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--seed", options.seed, "sampling seed")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  const std::string dir = resolve_checkpoint_dir(checkpoint);
  std::cerr << "generate: " << dir << "\n";
  std::cout << prompt << sample_text(dir, prompt, options) << std::endl;
  return 0;
}

}  // namespace dtrain

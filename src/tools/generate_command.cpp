#include "tools/generate_command.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "common/printable.h"
#include "tools/held_out_transcription.h"
#include "tools/image_transcription.h"
#include "train/sample_text.h"

namespace dtrain {

int generate_command(int argc, char** argv) {
  std::string checkpoint, tokenizer_path, prompt = "The ", image_path;
  int64_t held_out = 0;
  SamplingOptions options;
  CLI::App app{"Sample text from a checkpoint (a step directory, or a checkpoint.dir: its newest intact checkpoint), or transcribe an "
               "image with a vision-language one.",
               "dtrain generate"};
  app.add_option("--checkpoint", checkpoint, "checkpoint directory")->required();
  auto* prompt_flag = app.add_option("--prompt", prompt, "text to continue (with --image: the text after the image; default none)")->capture_default_str();
  auto* image_flag = app.add_option("--image", image_path, "image file (PNG, JPEG, ...) for a vision-language model to transcribe");
  auto* held_out_flag = app.add_option("--held-out", held_out, "transcribe this many held-out samples of the checkpoint's data.source and report character accuracy")
                            ->check(whole_number(1, int64_t(1) << 20));
  held_out_flag->excludes(image_flag);
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json or SentencePiece model (default: the one the checkpoint's run named in data.tokenizer)");
  auto* tokens_flag = app.add_option("--tokens", options.new_tokens, "tokens to generate (with an image: at most, up to the end token or a full row)")
                          ->check(whole_number(1, int64_t(1) << 20))->capture_default_str();
  auto* temperature_flag = app.add_option("--temperature", options.temperature, "softmax temperature; 0 is greedy (with an image the default is 0)")
                               ->check(real_number(0))->capture_default_str();
  app.add_option("--top-k", options.top_k, "sample among the k likeliest tokens; 0 for all")->check(whole_number(0))->capture_default_str();
  // CLI11 reads "-1" into an unsigned seed as 2^64-1 without a word.
  app.add_option("--seed", options.seed, "sampling seed")->check(whole_number(0))->capture_default_str();
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  const std::string dir = resolve_checkpoint_dir(checkpoint);
  std::cerr << "generate: " << printable(dir) << "\n";
  const std::unique_ptr<Tokenizer> tokenizer = checkpoint_tokenizer(dir, tokenizer_path);
  std::cerr << "generate: tokenizer: " << tokenizer->description() << "\n";
  // Without an image, a vision-language model continues text as a text model does.
  if (image_flag->count() == 0 && held_out_flag->count() == 0) {
    std::cout << sample_text(dir, prompt, options, *tokenizer) << std::endl;
    return 0;
  }
  ImageTranscriber transcriber(dir, *tokenizer);
  // A transcription is read, not invented: the likeliest text, to the end token or a full row.
  if (temperature_flag->count() == 0) options.temperature = 0;
  if (tokens_flag->count() == 0) options.new_tokens = transcriber.data_options().row.seq_len;
  if (prompt_flag->count() == 0) prompt.clear();
  if (held_out_flag->count() > 0) {
    Tokenizer* data_tokenizer = transcriber.data_tokenizer().empty() ? nullptr : tokenizer.get();
    transcribe_held_out(transcriber, data_tokenizer, held_out, options, std::cout);
    return 0;
  }
  std::cout << printable(transcriber.transcribe(transcriber.load_image(image_path), prompt, options), size_t(-1)) << std::endl;
  return 0;
}

}  // namespace dtrain

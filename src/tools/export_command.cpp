#include "tools/export_command.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "common/parse_command_line.h"
#include "common/printable.h"
#include "hf/hf_export.h"
#include "train/sample_text.h"
#include "train/train_config.h"

namespace dtrain {

int export_command(int argc, char** argv) {
  std::string checkpoint, format, out, dtype = "fp32", max_shard_size = "5GB";
  CLI::App app{"Export a checkpoint (a step directory, or a checkpoint.dir: its newest intact checkpoint) as a Hugging Face model "
               "that transformers' from_pretrained loads.",
               "dtrain export"};
  app.add_option("--checkpoint", checkpoint, "checkpoint directory")->required();
  app.add_option("--format", format, "output format: hf (Hugging Face transformers)")->required();
  app.add_option("--out", out, "directory to create (absent or empty)")->required();
  app.add_option("--dtype", dtype, "stored weights: fp32, bf16 or fp16")->capture_default_str();
  app.add_option("--max-shard-size", max_shard_size, "larger weights are split into shards with model.safetensors.index.json")
      ->capture_default_str();
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  HfExportOptions options;
  try {
    if (format != "hf") throw std::invalid_argument("--format must be hf, got \"" + printable(format) + "\"");
    options.dtype = parse_export_dtype(dtype);
    options.max_shard_bytes = parse_byte_size(max_shard_size);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  options.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const std::string dir = resolve_checkpoint_dir(checkpoint);
  std::cerr << "export: " << printable(dir) << " -> " << printable(out) << "\n";
  export_hf_checkpoint(dir, out, options);
  std::cerr << "export: done, " << printable(out) << " loads with transformers' from_pretrained\n";
  return 0;
}

}  // namespace dtrain

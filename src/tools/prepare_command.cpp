#include "tools/prepare_command.h"

#include <CLI/CLI.hpp>
#include <glob.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/elapsed.h"
#include "common/byte_words.h"
#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "common/printable.h"
#include "data/text_tokenization.h"
#include "data/token_shard_format.h"
#include "data/token_stream.h"

namespace dtrain {

namespace {

std::string rate(double bytes, double seconds) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << (seconds > 0 ? bytes / seconds / 1e6 : 0.0) << " MB/s";
  return s.str();
}

// Shards already under `pattern`: writing beside them would mix two corpora under one glob.
bool any_match(const std::string& pattern) {
  glob_t g{};
  const bool found = ::glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0;
  ::globfree(&g);
  return found;
}

}  // namespace

int prepare_command(int argc, char** argv) {
  std::string tokenizer_path, input, out, prefix;
  int64_t shard_tokens = 100'000'000;
  CLI::App app{"Tokenize a text corpus once into llm.c token shards (DIR/PREFIX_000000.bin, ...) for data.source "
               "bin:DIR/PREFIX_*.bin. uint16 tokens for vocabularies up to 65536, uint32 above.",
               "dtrain prepare"};
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json (byte-level BPE) or SentencePiece model")->required();
  app.add_option("--input", input, "text file (UTF-8)")->required();
  app.add_option("--out", out, "directory for the shards (created if missing)")->required();
  app.add_option("--prefix", prefix, "shard name prefix (default: the input's name without its extension)");
  app.add_option("--shard-tokens", shard_tokens, "tokens per shard")->check(whole_number(1, int64_t(INT32_MAX)))->capture_default_str();
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  if (prefix.empty()) prefix = std::filesystem::path(input).stem().string();
  const std::string pattern = out + "/" + prefix + "_*.bin";

  // Everything that can be refused is, before a byte is tokenized or written.
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(tokenizer_path);
  std::shared_ptr<const TokenBytes> text;
  try {
    text = TokenBytes::map(input);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("--input '" + printable(input) + "' " + e.what());
  }
  if (text->size() == 0) throw std::runtime_error("--input '" + printable(input) + "' is empty");
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw std::runtime_error("--out '" + printable(out) + "' cannot be created: " + ec.message());
  if (any_match(pattern)) throw std::runtime_error("--out already holds shards " + printable(pattern) + "; choose another --out or --prefix");

  const ShardFormat format = shard_format_for(tokenizer->vocab_size());
  std::cerr << "prepare: " << printable(input) << " (" << byte_words(double(text->size())) << ") with " << tokenizer->description()
            << " -> " << printable(pattern) << " (uint" << 8 * format.width << " tokens)\n";
  TokenShardWriter writer(out, prefix, format, shard_tokens);
  const SteadyClock::time_point start = SteadyClock::now();
  SteadyClock::time_point last_report = start;
  size_t released = 0;
  const std::string_view view(reinterpret_cast<const char*>(text->data()), text->size());
  tokenize_text(view, *tokenizer, [&](const std::vector<int32_t>& ids, size_t done) {
    writer.write(ids);
    text->release(released, done - released);  // a pass over the corpus stays out of this process's memory
    released = done;
    if (seconds_since(last_report) >= 1.0 && done < text->size()) {
      last_report = SteadyClock::now();
      std::cerr << "prepare: " << std::fixed << std::setprecision(1) << 100.0 * double(done) / double(text->size()) << "% ("
                << byte_words(double(done)) << "), " << writer.tokens() << " tokens, " << rate(double(done), seconds_since(start)) << "\n";
    }
  });
  const std::vector<std::string> shards = writer.finish();
  const double seconds = seconds_since(start);
  const nlohmann::json record = {{"input", std::filesystem::absolute(input).string()},
                                 {"tokenizer", std::filesystem::absolute(tokenizer_path).string()},
                                 {"vocab_size", tokenizer->vocab_size()},
                                 {"tokens", writer.tokens()},
                                 {"shards", shards.size()},
                                 {"token_bytes", format.width}};
  std::ofstream(out + "/" + prefix + ".prepare.json") << record.dump(2) << "\n";
  std::cerr << "prepare: " << writer.tokens() << " tokens in " << shards.size() << " shard(s), " << byte_words(double(text->size())) << " in "
            << std::fixed << std::setprecision(2) << seconds << " s (" << rate(double(text->size()), seconds) << ")\n";
  std::cout << "data.source: bin:" << pattern << "\n";
  return 0;
}

}  // namespace dtrain

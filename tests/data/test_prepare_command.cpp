// The tokenizer from the command line: `dtrain prepare` writes the shards bin: reads back as the
// reference ids, and a run or generate given a tokenizer that does not fit is refused before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/token_source.h"
#include "support/process.h"
#include "support/scratch.h"

using namespace dtrain;
using dtrain::test::contains;
using dtrain::test::run_process;
using dtrain::test::scratch_dir;

namespace {

const std::string kTokenizerFixtures = std::string(DTRAIN_SOURCE_DIR) + "/tests/data/tokenizers/";

std::vector<int64_t> reference_ids(const std::string& name) {
  std::ifstream in(kTokenizerFixtures + name);
  std::vector<int64_t> ids;
  for (int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

TEST(PrepareCommand, WritesShardsHoldingTheReferenceIdsAndSaysHowToUseThem) {
  const std::string out = scratch_dir("prepare") + "/shards";
  const auto r = run_process({DTRAIN_BIN, "prepare", "--tokenizer", kTokenizerFixtures + "llama3_style.json", "--input",
                              kTokenizerFixtures + "corpus.txt", "--out", out, "--shard-tokens", "500"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "data.source: bin:" + out + "/corpus_*.bin")) << r.output;
  EXPECT_TRUE(contains(r.output, "1474 tokens in 3 shard(s)")) << r.output;
  const TokenSource source = load_tokens("bin:" + out + "/corpus_*.bin");
  std::vector<int64_t> ids(size_t(source.tokens.size()));
  source.tokens.read(0, source.tokens.size(), ids.data());
  EXPECT_EQ(ids, reference_ids("corpus.llama3_style.ids"));

  // A second prepare into the same shards is refused, leaving the first one's intact.
  const auto again = run_process({DTRAIN_BIN, "prepare", "--tokenizer", kTokenizerFixtures + "gpt2_style.json", "--input",
                                  kTokenizerFixtures + "corpus.txt", "--out", out});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_TRUE(contains(again.output, "--out already holds shards")) << again.output;
  EXPECT_EQ(load_tokens("bin:" + out + "/corpus_*.bin").tokens.size(), int64_t(ids.size()));
}

TEST(PrepareCommand, ABadTokenizerFileIsNamedAndNothingIsWritten) {
  const std::string dir = scratch_dir("prepare_bad");
  std::ofstream(dir + "/tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []";
  const auto r = run_process({DTRAIN_BIN, "prepare", "--tokenizer", dir + "/tokenizer.json", "--input",
                              kTokenizerFixtures + "corpus.txt", "--out", dir + "/shards"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "tokenizer '" + dir + "/tokenizer.json' is not valid JSON")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/shards"));
}

TEST(ConfigCheck, ATokenizerLargerThanTheModelsVocabularyIsRefusedByName) {
  const auto r = run_process({DTRAIN_BIN, "config", "check", "--set", "data.tokenizer=" + kTokenizerFixtures + "gpt2_style.json",
                              "--set", "model.vocab_size=512"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "data.tokenizer: the tokenizer (byte-level BPE")) << r.output;
  EXPECT_TRUE(contains(r.output, "makes ids up to 799, past model.vocab_size 512")) << r.output;
  const auto fits = run_process({DTRAIN_BIN, "config", "check", "--set", "data.tokenizer=" + kTokenizerFixtures + "sentencepiece.model",
                                 "--set", "model.vocab_size=600"});
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
}

}  // namespace

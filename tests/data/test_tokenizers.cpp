// Tokenizers against the reference libraries: the committed corpus (tests/data/tokenizers/, made by
// make_fixtures.py there) must encode to exactly the ids Hugging Face `tokenizers` and Python
// `sentencepiece` gave it, and decode back to itself; bad tokenizer files are refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "data/pretoken_split.h"
#include "data/text_tokenization.h"
#include "data/token_shard_format.h"
#include "data/token_source.h"
#include "data/tokenizer.h"
#include "support/scratch.h"

using namespace dtrain;
using dtrain::test::scratch_dir;

namespace {

const std::string kFixtures = std::string(DTRAIN_SOURCE_DIR) + "/tests/data/tokenizers/";

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<int32_t> file_ids(const std::string& path) {
  std::istringstream in(file_text(path));
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

std::string write_scratch_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The message load_tokenizer throws for `path`, or "" when it loads.
std::string tokenizer_error(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

class ReferenceIds : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(ReferenceIds, CorpusEncodesToTheReferenceIdsAndDecodesBack) {
  const auto [tokenizer_file, ids_file] = GetParam();
  const std::string corpus = file_text(kFixtures + "corpus.txt");
  const std::vector<int32_t> expected = file_ids(kFixtures + ids_file);
  ASSERT_GT(expected.size(), 1000u);
  auto tokenizer = load_tokenizer(kFixtures + tokenizer_file);
  std::vector<int32_t> ids;
  tokenizer->encode(corpus, ids);
  size_t first_difference = 0;
  while (first_difference < std::min(ids.size(), expected.size()) && ids[first_difference] == expected[first_difference]) ++first_difference;
  if (first_difference < std::max(ids.size(), expected.size())) {
    const size_t from = first_difference >= 5 ? first_difference - 5 : 0;
    const auto text_of = [&](const std::vector<int32_t>& v) {
      return tokenizer->decode(std::vector<int64_t>(v.begin() + std::ptrdiff_t(std::min(from, v.size())),
                                                    v.begin() + std::ptrdiff_t(std::min(first_difference + 5, v.size()))));
    };
    ADD_FAILURE() << "ids differ first at " << first_difference << " of " << expected.size() << " (" << ids.size()
                  << " encoded)\n  reference: \"" << text_of(expected) << "\"\n  dtrain:    \"" << text_of(ids) << "\"";
  }
  EXPECT_EQ(tokenizer->decode(std::vector<int64_t>(ids.begin(), ids.end())), corpus);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ReferenceIds,
                         ::testing::Values(std::pair{"gpt2_style.json", "corpus.gpt2_style.ids"},
                                           std::pair{"llama3_style.json", "corpus.llama3_style.ids"},
                                           std::pair{"sentencepiece.model", "corpus.sentencepiece.ids"}));

TEST(Tokenizers, ByteLevelBpeKeepsBytesThatAreNotUtf8) {
  auto tokenizer = load_tokenizer(kFixtures + "gpt2_style.json");
  const std::string text = "ok \xff\xfe broken \xe4\xb8 tail \xf0\x9f\x99";
  std::vector<int32_t> ids;
  tokenizer->encode(text, ids);
  EXPECT_EQ(tokenizer->decode(std::vector<int64_t>(ids.begin(), ids.end())), text);
}

TEST(Tokenizers, VocabularySizesCoverEveryId) {
  EXPECT_EQ(load_tokenizer("")->vocab_size(), 256);
  EXPECT_EQ(load_tokenizer(kFixtures + "sentencepiece.model")->vocab_size(), 600);
  for (const char* file : {"gpt2_style.json", "llama3_style.json"}) {
    auto tokenizer = load_tokenizer(kFixtures + file);
    EXPECT_GT(tokenizer->vocab_size(), 256) << file;
    EXPECT_LE(tokenizer->vocab_size(), 800) << file;
  }
}

TEST(Tokenizers, AVocabularyLargerThanTheModelsIsRefusedByName) {
  auto tokenizer = load_tokenizer(kFixtures + "gpt2_style.json");
  EXPECT_NO_THROW(require_vocab_fits(*tokenizer, tokenizer->vocab_size(), "model.vocab_size"));
  try {
    require_vocab_fits(*tokenizer, 256, "model.vocab_size");
    FAIL() << "a tokenizer of " << tokenizer->vocab_size() << " tokens fit a model of 256";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("past model.vocab_size 256"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gpt2_style.json"), std::string::npos) << e.what();
  }
}

TEST(Tokenizers, BadFilesAreRefusedNamingTheFileAndTheFault) {
  const std::string dir = scratch_dir("bad_tokenizers");
  const std::string good = file_text(kFixtures + "gpt2_style.json");
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {write_scratch_file(dir, "missing.json", ""), "is neither a tokenizer.json nor a SentencePiece model"},
      {write_scratch_file(dir, "truncated.json", good.substr(0, good.size() / 2)), "is not valid JSON"},
      {write_scratch_file(dir, "wordpiece.json", edited("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")), "model.type is \"WordPiece\""},
      {write_scratch_file(dir, "pattern.json", edited("\"use_regex\": true", "\"use_regex\": false")), "pre_tokenizer.use_regex is false"},
      {write_scratch_file(dir, "normalizer.json", edited("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}")), "normalizer is of type \"NFC\""},
      {write_scratch_file(dir, "merge.json", edited("\"merges\": [", "\"merges\": [[\"Ġ\", \"nowhere\"], ")), "model.merges[0]"},
      {write_scratch_file(dir, "garbage.model", "\x01\x02 not a model"), "is neither a tokenizer.json nor a SentencePiece model"},
      {dir + "/absent.json", "does not exist"},
  };
  for (const auto& [path, expected] : cases) {
    const std::string message = tokenizer_error(path);
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << "for " << path << ": " << message;
  }
}

TEST(Tokenizers, SplitPatternsAreRecognisedOnlyVerbatim) {
  SplitPattern p;
  EXPECT_TRUE(split_pattern_of(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", p));
  EXPECT_EQ(p, SplitPattern::Gpt2);
  EXPECT_FALSE(split_pattern_of(R"(\w+|\s+)", p));
}

TEST(Tokenizers, Gpt2SplitLeavesTheLastSpaceOfARunToTheWordAfterIt) {
  std::vector<std::string_view> pieces;
  split_pretokens("a   b\n\n c 12 it's", SplitPattern::Gpt2, pieces);
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"a", "  ", " b", "\n\n", " c", " 12", " it", "'s"}));
  pieces.clear();
  split_pretokens("x1234 \n\nY'S", SplitPattern::Llama3, pieces);
  EXPECT_EQ(pieces, (std::vector<std::string_view>{"x", "123", "4", " \n\n", "Y", "'S"}));
}

}  // namespace

namespace {

std::vector<int32_t> stream_ids(const TokenStream& tokens) {
  std::vector<int64_t> all(size_t(tokens.size()));
  tokens.read(0, tokens.size(), all.data());
  return std::vector<int32_t>(all.begin(), all.end());
}

// Chunked tokenization into shards of both widths reads back, through bin:, as the reference ids of
// the whole text: chunk boundaries change nothing for byte-level BPE.
TEST(TokenizedCorpus, ShardsOfEitherWidthHoldTheWholeTextsIds) {
  const std::string corpus = file_text(kFixtures + "corpus.txt");
  const std::vector<int32_t> expected = file_ids(kFixtures + "corpus.gpt2_style.ids");
  auto tokenizer = load_tokenizer(kFixtures + "gpt2_style.json");
  for (const ShardFormat format : {kUint16Shard, kUint32Shard}) {
    const std::string dir = scratch_dir("shards_" + std::to_string(format.width));
    TokenShardWriter writer(dir, "corpus", format, 1000);
    size_t chunks = 0, last_done = 0;
    tokenize_text(corpus, *tokenizer, [&](const std::vector<int32_t>& ids, size_t done) {
      EXPECT_GT(done, last_done);
      last_done = done, ++chunks;
      writer.write(ids);
    }, 200);
    EXPECT_GT(chunks, 5u);
    EXPECT_EQ(last_done, corpus.size());
    const std::vector<std::string> shards = writer.finish();
    EXPECT_EQ(shards.size(), (expected.size() + 999) / 1000);
    const TokenSource source = load_tokens("bin:" + dir + "/corpus_*.bin");
    EXPECT_EQ(stream_ids(source.tokens), expected) << "width " << format.width;
    EXPECT_EQ(source.tokens.max_possible_token(), format.width == 2 ? 65535 : int64_t(UINT32_MAX));
  }
}

TEST(TokenizedCorpus, ATextSourceIsTokenizedByTheGivenTokenizer) {
  auto tokenizer = load_tokenizer(kFixtures + "llama3_style.json");
  const TokenSource source = load_tokens("text:" + kFixtures + "corpus.txt", tokenizer.get());
  EXPECT_EQ(stream_ids(source.tokens), file_ids(kFixtures + "corpus.llama3_style.ids"));
  EXPECT_NE(source.description.find("tokens by byte-level BPE"), std::string::npos) << source.description;
  EXPECT_EQ(load_tokens("text:" + kFixtures + "corpus.txt").tokens.size(), int64_t(file_text(kFixtures + "corpus.txt").size()));
}

}  // namespace

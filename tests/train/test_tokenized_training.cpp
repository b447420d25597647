// A run on text tokenized by the model's own tokenizer (data.tokenizer), and generate decoding with
// the tokenizer its checkpoint names, or refusing one whose ids the model has no rows for.
#include <gtest/gtest.h>

#include "support/process.h"
#include "support/scratch.h"
#include "train/training_run.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

const std::string kTokenizerDir = std::string(DTRAIN_SOURCE_DIR) + "/tests/data/tokenizers/";

TEST(TokenizedTraining, ARunTrainsOnTokenizedTextAndGenerateDecodesWithItsTokenizer) {
  const std::string dir = scratch_dir("tokenized_run");
  const TrainingRun run = train(dir, 1, {"data.source=text:" + kTokenizerDir + "corpus.txt",
                                         "data.tokenizer=" + kTokenizerDir + "sentencepiece.model", "model.vocab_size=600",
                                         "model.seq_len=32"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  std::ifstream log(dir + "/rank-0.log");
  const std::string log_text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(log_text, "2169 tokens by SentencePiece")) << log_text;  // the reference's count for the corpus

  auto r = run_process({DTRAIN_BIN, "generate", "--checkpoint", dir + "/ckpt", "--prompt", "Über café", "--tokens", "5"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tokenizer: SentencePiece " + kTokenizerDir + "sentencepiece.model (600 tokens)")) << r.output;
  EXPECT_TRUE(contains(r.output, "Über café")) << r.output;

  r = run_process({DTRAIN_BIN, "generate", "--checkpoint", dir + "/ckpt", "--tokenizer", kTokenizerDir + "gpt2_style.json"}, 60);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "makes ids up to 799, past the checkpoint's model.vocab_size 600")) << r.output;
}

TEST(TokenizedTraining, ARankStartedWithoutPreflightRefusesATokenizerLargerThanTheModel) {
  const std::string dir = scratch_dir("tokenized_train_alone");
  const std::vector<ProcessResult> ranks =
      train_ranks_alone(dir, 1, {"data.tokenizer=" + kTokenizerDir + "gpt2_style.json", "model.vocab_size=600"});
  EXPECT_EQ(ranks[0].exit_code, 2) << ranks[0].output;  // a refused configuration
  EXPECT_TRUE(contains(ranks[0].output, "data.tokenizer: the tokenizer (byte-level BPE")) << ranks[0].output;
}

}  // namespace

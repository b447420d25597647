// Checkpoints stay layout-free under tensor parallelism: a run stopped under one layout (tp, with or
// without ZeRO-3 over dp) resumes under another and trains like the uninterrupted one-rank run, its
// losses after each resume and its final parameters within the fp32 bounds of another summation
// order (equivalence.h). The index says how the saving layout cut each tensor, and `dtrain generate`
// reads a tensor-parallel checkpoint as it reads the same tensors written by one rank.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"
#include "rewritten_checkpoint.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// 6 steps of a global batch of 8 whatever the layout (micro-batches of 2, accumulated to fill it),
// every checkpoint kept.
constexpr int kSteps = 6;
const Sets kJob = {"train.steps=6", "train_batch_size=8", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=auto",
                   "checkpoint.every_steps=2", "checkpoint.keep=0"};

const Sets kGpt2 = {"model.arch=gpt2"};
const Sets kLlama = {"model.arch=llama", "model.n_head=4", "model.n_kv_head=2"};
// 257 rows split 129 + 128 over tp 2 and 86 + 86 + 85 over tp 3, in the embedding and in an untied
// head; 6 heads and 192 MLP features divide by both.
const Sets kUnevenVocabulary = {"model.arch=gpt2", "model.vocab_size=257", "model.tie_embeddings=false", "model.n_head=6", "model.d_model=48"};

// Part of a run: `ranks` ranks under `layout` train up to step `until`, resuming where the previous leg stopped.
struct Leg {
  int ranks;
  Sets layout;
  int until;
  std::string says;  // a line of the leg's output that shows its layout at work
};

const Sets kTp2 = {"parallel.tp=2"};
const std::string kSaysTp2 = "tensor parallel: tp 2", kSaysOneRank = "batch: 8 = micro 2 x accumulation 4 x dp 1";

// `model`'s job in one run directory, leg by leg; the last leg's run, whose metrics.jsonl holds every step.
TrainingRun train_in_legs(const std::string& name, const Sets& model, const std::vector<Leg>& legs) {
  const std::string dir = scratch_dir(name);
  TrainingRun run;
  int resumed_at = 0;
  for (const Leg& leg : legs) {
    const Sets stop = leg.until < kSteps ? Sets{"train.stop_at_step=" + std::to_string(leg.until)} : Sets{};
    run = train(dir, leg.ranks, kJob + model + leg.layout + stop);
    if (run.result.exit_code != 0) {
      ADD_FAILURE() << "the leg to step " << leg.until << " on " << leg.ranks << " rank(s) failed:\n" << run.result.output;
      return run;
    }
    EXPECT_TRUE(contains(run.result.output, leg.says)) << "the leg to step " << leg.until << " never says '" << leg.says << "'";
    if (resumed_at > 0)
      EXPECT_TRUE(contains(run.result.output, "resumed from " + ckpt(dir, resumed_at) + " at step " + std::to_string(resumed_at)))
          << run.result.output;
    resumed_at = leg.until;
  }
  return run;
}

// The legs trained like `model`'s job on one rank, uninterrupted; returns their run directory.
std::string expect_legs_train_like_one_rank(const std::string& name, const Sets& model, const std::vector<Leg>& legs) {
  const TrainingRun straight = train(scratch_dir(name + "_straight"), 1, kJob + model);
  EXPECT_EQ(straight.result.exit_code, 0) << straight.result.output;
  const TrainingRun resumed = train_in_legs(name, model, legs);
  expect_same_training(resumed, straight, kSteps);
  return resumed.dir;
}

json index_of(const std::string& step_dir) { return json::parse(read_text_file(step_dir + "/" + kCheckpointIndexFile)); }

// The first row and the rows of each chunk of `tensor`, by first row: [[0, 129], [129, 128]].
json chunk_rows(const json& index, const std::string& tensor) {
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (const json& c : index["tensors"][tensor]["chunks"]) rows.emplace_back(c["offset"][0].get<int64_t>(), c["size"][0].get<int64_t>());
  std::sort(rows.begin(), rows.end());
  return rows;
}

// What `dtrain generate` samples from a checkpoint (the text alone, without the line naming it).
std::string generated(const std::string& step_dir) {
  const ProcessResult r = run_process({DTRAIN_BIN, "generate", "--checkpoint", step_dir, "--prompt", "The ", "--tokens", "24",
                                       "--temperature", "1", "--seed", "5"},
                                      60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string named = "generate: " + step_dir + "\n";
  EXPECT_TRUE(contains(r.output, named)) << r.output;
  std::string text = r.output;
  return text.erase(text.find(named), named.size());
}

// `dtrain generate` samples from `step_dir`, saved by several ranks, what it samples from the same
// tensors written whole by one rank.
void expect_generates_as_from_one_rank(const std::string& step_dir, const std::string& name) {
  ASSERT_TRUE(fs::exists(step_dir + "/" + shard_file_name(1))) << step_dir << " was written by one rank";
  const std::string one_rank = scratch_dir(name) + "/" + fs::path(step_dir).filename().string();
  fs::copy(step_dir, one_rank, fs::copy_options::recursive);
  rewrite_as_one_rank(one_rank);
  ASSERT_FALSE(fs::exists(one_rank + "/" + shard_file_name(1)));
  const std::string text = generated(step_dir);
  EXPECT_TRUE(contains(text, "The ")) << text;
  EXPECT_EQ(text, generated(one_rank)) << step_dir << " against its tensors written by one rank";
}

}  // namespace

// tp 2 -> tp 1 -> tp 2. The tp 2 checkpoint's index says how tensor parallelism cut each tensor,
// and generation reads it.
TEST(TensorParallelResume, Tp2ResumesAtTp1AndTp1AtTp2LikeTheUninterruptedRun) {
  const std::string dir = expect_legs_train_like_one_rank("tp_resume", kGpt2,
                                                          {{2, kTp2, 2, kSaysTp2}, {1, {}, 4, kSaysOneRank}, {2, kTp2, 6, kSaysTp2}});
  const std::string tp2 = ckpt(dir, 2);
  const json index = index_of(tp2);
  // Column-parallel layers and the embedding by rows, row-parallel ones by columns, norms whole.
  const json rows = json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "shard", "dim": 0}])");
  const json columns = json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "shard", "dim": 1}])");
  for (const std::string tensor : {"model/blocks.0.q_proj.weight", "model/blocks.1.up_proj.bias", "model/wte.weight",
                                   "optimizer/exp_avg/blocks.0.k_proj.weight"})
    EXPECT_EQ(index["tensors"][tensor]["placements"], rows) << tensor;
  for (const std::string tensor : {"model/blocks.0.o_proj.weight", "model/blocks.1.down_proj.weight", "optimizer/exp_avg_sq/blocks.0.o_proj.weight"})
    EXPECT_EQ(index["tensors"][tensor]["placements"], columns) << tensor;
  EXPECT_EQ(index["tensors"]["model/blocks.0.ln1.weight"]["placements"],
            json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "replicate"}])"));
  EXPECT_EQ(chunk_rows(index, "model/blocks.0.q_proj.weight"), json::parse("[[0, 16], [16, 16]]"));
  expect_generates_as_from_one_rank(tp2, "tp_resume_generate");
}

// tp 2 with ZeRO-3 over dp 2 (4 ranks) -> tp 1 on one rank -> tp 1 with ZeRO-3 over dp 2 -> tp 2 alone.
TEST(TensorParallelResume, Tp2WithZero3ResumesAtTp1AndTp1WithZero3AtTp2) {
  const Sets zero3 = {"zero_optimization.stage=3"};
  const std::string dir = expect_legs_train_like_one_rank(
      "tp_zero3_resume", kGpt2,
      {{4, kTp2 + zero3, 2, "ZeRO stage 3: parameters, gradients and optimizer state sharded over 2"},
       {1, {}, 3, kSaysOneRank},
       {2, zero3, 4, "batch: 8 = micro 2 x accumulation 2 x dp 2"},
       {2, kTp2, 6, kSaysTp2}});
  const std::string tp2_zero3 = ckpt(dir, 2);
  EXPECT_EQ(index_of(tp2_zero3)["tensors"]["model/blocks.0.o_proj.weight"]["placements"],
            json::parse(R"([{"mesh_dim": "tp", "ranks": 2, "placement": "shard", "dim": 1},
                            {"mesh_dim": "dp_shard", "ranks": 2, "placement": "flat_shard"}])"));
  expect_generates_as_from_one_rank(tp2_zero3, "tp_zero3_resume_generate");
}

// Llama with 4 query heads and 2 key/value heads: tp 2 splits both, tp 4 replicates the key/value
// weights (each pair of ranks reads one head), and its checkpoint stores them once, whole.
TEST(TensorParallelResume, LlamaAtTp2ResumesAtTp4WithTheKeyValueHeadsReplicated) {
  const std::string dir = expect_legs_train_like_one_rank(
      "tp_llama_resume", kLlama, {{2, kTp2, 3, kSaysTp2}, {4, {"parallel.tp=4"}, 6, "key/value weights replicated"}});
  const json tp2 = index_of(ckpt(dir, 2)), tp4 = index_of(ckpt(dir, 6));
  EXPECT_EQ(chunk_rows(tp2, "model/blocks.0.k_proj.weight"), json::parse("[[0, 8], [8, 8]]"));
  EXPECT_EQ(tp4["tensors"]["model/blocks.0.k_proj.weight"]["placements"],
            json::parse(R"([{"mesh_dim": "tp", "ranks": 4, "placement": "replicate"}])"));
  EXPECT_EQ(chunk_rows(tp4, "model/blocks.0.k_proj.weight"), json::parse("[[0, 16]]"));
  EXPECT_EQ(chunk_rows(tp4, "model/blocks.0.q_proj.weight"), json::parse("[[0, 8], [8, 8], [16, 8], [24, 8]]"));
}

// A vocabulary that no tp divides, split as torch.chunk splits it: tp 2 -> tp 1 -> tp 3, whose
// checkpoints hold the embedding and the head in rows of 129 + 128 and of 86 + 86 + 85.
TEST(TensorParallelResume, AnUnevenVocabularyResumesFromTp2AtTp1AndAtTp3) {
  const std::string dir = expect_legs_train_like_one_rank(
      "tp_vocab_resume", kUnevenVocabulary,
      {{2, kTp2, 2, "vocabulary rows 0..128 of 257"}, {1, {}, 4, kSaysOneRank}, {3, {"parallel.tp=3"}, 6, "vocabulary rows 0..85 of 257"}});
  const json tp2 = index_of(ckpt(dir, 2)), tp3 = index_of(ckpt(dir, 6));
  for (const std::string tensor : {"model/wte.weight", "model/lm_head.weight", "optimizer/exp_avg/lm_head.weight"}) {
    EXPECT_EQ(chunk_rows(tp2, tensor), json::parse("[[0, 129], [129, 128]]")) << tensor;
    EXPECT_EQ(chunk_rows(tp3, tensor), json::parse("[[0, 86], [86, 86], [172, 85]]")) << tensor;
  }
}

}  // namespace dtrain::test

// Checkpoints stay layout-free under tensor parallelism: a run stopped under one layout (tp, with or
// without ZeRO-3 over dp) resumes under another and trains like the uninterrupted one-rank run, its
// losses after each resume and its final parameters within the fp32 bounds of another summation
// order (equivalence.h). The index says how the saving layout cut each tensor, and `dtrain generate`
// reads a tensor-parallel checkpoint as it reads the same tensors written by one rank.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "layout_legs.h"

namespace dtrain::test {
namespace {

using nlohmann::json;

const Sets kGpt2 = {"model.arch=gpt2"};
// 257 rows split 129 + 128 over tp 2 and 86 + 86 + 85 over tp 3, in the embedding and in an untied
// head; 6 heads and 192 MLP features divide by both.
const Sets kUnevenVocabulary = {"model.arch=gpt2", "model.vocab_size=257", "model.tie_embeddings=false", "model.n_head=6", "model.d_model=48"};

const Sets kTp2 = {"parallel.tp=2"};
const std::string kSaysTp2 = "tensor parallel: tp 2";

// The first row and the rows of each chunk of `tensor`, by first row: [[0, 129], [129, 128]].
json chunk_rows(const json& index, const std::string& tensor) {
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (const json& c : index["tensors"][tensor]["chunks"]) rows.emplace_back(c["offset"][0].get<int64_t>(), c["size"][0].get<int64_t>());
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

// tp 2 -> tp 1 -> tp 2. The tp 2 checkpoint's index says how tensor parallelism cut each tensor,
// and generation reads it.
TEST(TensorParallelResume, Tp2ResumesAtTp1AndTp1AtTp2LikeTheUninterruptedRun) {
  const std::string dir = expect_legs_train_like_one_rank("tp_resume", kLayoutJob + kGpt2,
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
      "tp_zero3_resume", kLayoutJob + kGpt2,
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
      "tp_llama_resume", kLayoutJob + kLlamaGqa, {{2, kTp2, 3, kSaysTp2}, {4, {"parallel.tp=4"}, 6, "key/value weights replicated"}});
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
      "tp_vocab_resume", kLayoutJob + kUnevenVocabulary,
      {{2, kTp2, 2, "vocabulary rows 0..128 of 257"}, {1, {}, 4, kSaysOneRank}, {3, {"parallel.tp=3"}, 6, "vocabulary rows 0..85 of 257"}});
  const json tp2 = index_of(ckpt(dir, 2)), tp3 = index_of(ckpt(dir, 6));
  for (const std::string tensor : {"model/wte.weight", "model/lm_head.weight", "optimizer/exp_avg/lm_head.weight"}) {
    EXPECT_EQ(chunk_rows(tp2, tensor), json::parse("[[0, 129], [129, 128]]")) << tensor;
    EXPECT_EQ(chunk_rows(tp3, tensor), json::parse("[[0, 86], [86, 86], [172, 85]]")) << tensor;
  }
}

}  // namespace dtrain::test

// Checkpoints stay layout-free under pipeline parallelism: a run stopped under one pipeline (pp 2,
// with ZeRO-1 over dp 2) resumes under another layout (one rank, pp 4, tp 2, interleaved stages) and
// trains like the uninterrupted one-rank run, within the fp32 bounds of another summation order
// (equivalence.h). Each stage writes the tensors of its own blocks, the tied embedding (on the
// first and the last stage) once, and the index says which stages hold each; `dtrain generate`
// reads a pipeline's checkpoint as it reads the same tensors written by one rank.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "layout_legs.h"

namespace dtrain::test {
namespace {

using nlohmann::json;

// Both models of layout_legs.h tie the embedding to the head, so the first and the last stage hold a copy.
const Sets kTwoStages = {"parallel.pp=2"};
const std::string kSaysPp2 = "pipeline parallel: pp 2 x 1 virtual stage(s), 2 chunks of 2, 2 blocks";

// The placement of a tensor that pp stages `stages` of `pp` hold, then `more` over the other dims.
json on_stages(int pp, const std::vector<int>& stages, const json& more = json::array()) {
  json placements = json::array({{{"mesh_dim", "pp"}, {"ranks", pp}, {"placement", "stages"}, {"stages", stages}}});
  for (const json& p : more) placements.push_back(p);
  return placements;
}

int64_t element_count(const json& sizes) {
  int64_t n = 1;
  for (const json& s : sizes) n *= s.get<int64_t>();
  return n;
}

// The elements a chunk of the index stores: its box, or the part of it a flat shard names.
int64_t stored_elements(const json& chunk) {
  if (chunk.contains("flat_range")) return chunk["flat_range"][1].get<int64_t>() - chunk["flat_range"][0].get<int64_t>();
  return element_count(chunk["size"]);
}

// The index holds every tensor a one-rank checkpoint of the same step holds, and no other, each
// stored once: its chunks add up to its element_count, however many stages hold a copy.
void expect_every_tensor_once(const json& index, const json& one_rank) {
  for (auto it = one_rank["tensors"].begin(); it != one_rank["tensors"].end(); ++it)
    EXPECT_TRUE(index["tensors"].contains(it.key())) << it.key() << " is missing";
  for (auto it = index["tensors"].begin(); it != index["tensors"].end(); ++it) {
    EXPECT_TRUE(one_rank["tensors"].contains(it.key())) << it.key() << " is not in a one-rank checkpoint";
    int64_t stored = 0;
    for (const json& chunk : it.value()["chunks"]) stored += stored_elements(chunk);
    EXPECT_EQ(stored, element_count(it.value()["shape"])) << it.key() << " is stored in " << it.value()["chunks"].dump();
  }
}

}  // namespace

// pp 2 (1f1b) -> one rank -> pp 4 (zero_bubble). The pp 2 checkpoint holds each block on its stage
// and the tied embedding once, placed on the first and the last stage; generation reads it.
TEST(PipelineResume, Gpt2AtPp2ResumesOnOneRankAndOneRankAtPp4LikeTheUninterruptedRun) {
  const std::string dir = expect_legs_train_like_one_rank(
      "pp_resume", kLayoutJob + kGpt2FourBlocks,
      {{2, kTwoStages, 2, kSaysPp2},
       {1, {}, 4, kSaysOneRank},
       {4, {"parallel.pp=4", "parallel.pipeline.schedule=zero_bubble"}, 6, "4 chunks of 1, 1, 1, 1 blocks, schedule zero_bubble"}});
  const json pp2 = index_of(ckpt(dir, 2)), pp4 = index_of(ckpt(dir, 6));
  expect_every_tensor_once(pp2, index_of(ckpt(dir + "_straight", 2)));
  expect_every_tensor_once(pp4, index_of(ckpt(dir + "_straight", 6)));
  for (const std::string tensor : {"model/wte.weight", "optimizer/exp_avg/wte.weight", "optimizer/exp_avg_sq/wte.weight"}) {
    EXPECT_EQ(pp2["tensors"][tensor]["placements"], on_stages(2, {0, 1})) << tensor;
    EXPECT_EQ(pp4["tensors"][tensor]["placements"], on_stages(4, {0, 3})) << tensor;
  }
  for (const std::string tensor : {"model/wpe.weight", "model/blocks.1.up_proj.weight", "optimizer/exp_avg/blocks.0.q_proj.bias"})
    EXPECT_EQ(pp2["tensors"][tensor]["placements"], on_stages(2, {0})) << tensor;
  for (const std::string tensor : {"model/blocks.2.q_proj.weight", "model/ln_f.weight", "optimizer/exp_avg_sq/blocks.3.down_proj.weight"})
    EXPECT_EQ(pp2["tensors"][tensor]["placements"], on_stages(2, {1})) << tensor;
  for (int block = 0; block < 4; ++block) {
    const std::string tensor = "model/blocks." + std::to_string(block) + ".ln1.weight";
    EXPECT_EQ(pp4["tensors"][tensor]["placements"], on_stages(4, {block})) << tensor;
  }
  expect_generates_as_from_one_rank(ckpt(dir, 2), "pp_resume_generate");
}

// pp 2 with ZeRO-1 over dp 2 (4 ranks) -> tp 2 without a pipeline -> pp 2 interleaved, each rank
// holding two chunks of one block. ZeRO-1's optimizer state is a flat shard within each stage.
TEST(PipelineResume, LlamaAtPp2WithZero1ResumesAtTp2AndTp2AsAnInterleavedPipeline) {
  const std::string dir = expect_legs_train_like_one_rank(
      "pp_llama_resume", kLayoutJob + kLlamaFourBlocks,
      {{4, kTwoStages + Sets{"zero_optimization.stage=1"}, 2, "batch: 8 = micro 2 x accumulation 2 x dp 2"},
       {2, {"parallel.tp=2"}, 4, "tensor parallel: tp 2"},
       {2, kTwoStagesInterleaved, 6, "pp 2 x 2 virtual stage(s), 4 chunks of 1, 1, 1, 1 blocks, schedule interleaved_1f1b"}});
  const json zero1 = index_of(ckpt(dir, 2)), interleaved = index_of(ckpt(dir, 6));
  expect_every_tensor_once(zero1, index_of(ckpt(dir + "_straight", 2)));
  expect_every_tensor_once(interleaved, index_of(ckpt(dir + "_straight", 6)));
  const json replicated = json::parse(R"([{"mesh_dim": "dp_shard", "ranks": 2, "placement": "replicate"}])");
  const json flat = json::parse(R"([{"mesh_dim": "dp_shard", "ranks": 2, "placement": "flat_shard"}])");
  EXPECT_EQ(zero1["tensors"]["model/blocks.0.k_proj.weight"]["placements"], on_stages(2, {0}, replicated));
  EXPECT_EQ(zero1["tensors"]["model/ln_f.weight"]["placements"], on_stages(2, {1}, replicated));
  EXPECT_EQ(zero1["tensors"]["model/wte.weight"]["placements"], on_stages(2, {0, 1}, replicated));
  EXPECT_EQ(zero1["tensors"]["optimizer/exp_avg/wte.weight"]["placements"], on_stages(2, {0, 1}, flat));
  EXPECT_EQ(zero1["tensors"]["optimizer/exp_avg_sq/blocks.3.gate_proj.weight"]["placements"], on_stages(2, {1}, flat));
  // Chunk c of 4 is on rank c mod 2.
  for (int block = 0; block < 4; ++block) {
    const std::string tensor = "model/blocks." + std::to_string(block) + ".o_proj.weight";
    EXPECT_EQ(interleaved["tensors"][tensor]["placements"], on_stages(2, {block % 2})) << tensor;
  }
  expect_generates_as_from_one_rank(ckpt(dir, 6), "pp_llama_resume_generate");
}

}  // namespace dtrain::test

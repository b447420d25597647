// Checkpoints stay layout-free under context parallelism: parameters are replicated over cp, so a
// run stopped at cp 2 resumes at cp 1 and the other way round, and trains like the uninterrupted
// one-rank run (equivalence.h's fp32 bounds of another summation order). ZeRO shards over dp x cp,
// and its checkpoint says so.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "layout_legs.h"

namespace dtrain::test {
namespace {

using nlohmann::json;

const Sets kRingCp2 = {"parallel.cp=2"};
const std::string kSaysRingCp2 = "context parallel: cp 2, ring attention";

}  // namespace

// cp 2 -> cp 1 -> cp 2 (Ulysses): the checkpoint of each is read by the other.
TEST(ContextParallelResume, Cp2ResumesAtCp1AndCp1AtCp2LikeTheUninterruptedRun) {
  expect_legs_train_like_one_rank("cp_resume", kLayoutJob + kLlamaGqa,
                                  {{2, kRingCp2, 2, kSaysRingCp2},
                                   {1, {}, 4, kSaysOneRank},
                                   {2, kRingCp2 + Sets{"parallel.context.impl=\"ulysses\""}, 6, "context parallel: cp 2, Ulysses"}});
}

// ZeRO-3 over the two cp ranks of dp 1 -> cp 1 with ZeRO-3 over dp 2: the shards are cut over
// dp_shard x cp, then over dp_shard alone.
TEST(ContextParallelResume, Zero3OverCp2ResumesAsZero3OverDp2) {
  const Sets zero3 = {"zero_optimization.stage=3"};
  const std::string dir = expect_legs_train_like_one_rank(
      "cp_zero3_resume", kLayoutJob + kLlamaGqa,
      {{2, kRingCp2 + zero3, 3, "ZeRO stage 3: parameters, gradients and optimizer state sharded over 2"},
       {2, zero3, 6, "batch: 8 = micro 2 x accumulation 2 x dp 2"}});
  EXPECT_EQ(index_of(ckpt(dir, 2))["tensors"]["model/blocks.0.o_proj.weight"]["placements"],
            json::parse(R"([{"mesh_dim": "cp", "ranks": 2, "placement": "flat_shard"}])"));
}

}  // namespace dtrain::test

// ParallelDims' validation and inference, and the groups of the mesh it lays out, without
// communication.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "comm/device_mesh.h"
#include "parallel/parallel_dims.h"

namespace dtrain {
namespace {

std::string error_of(const ParallelDims& dims, int world) {
  try {
    dims.resolved(world);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParallelDims, DpShardIsInferredByDefault) {
  ParallelDims d;
  d.tp = 2;
  d.pp = 2;
  const ParallelDims r = d.resolved(16);
  EXPECT_EQ(r.dp_shard, 4);
  EXPECT_EQ(r.dp_replicate, 1);
  EXPECT_EQ(r.dp(), 4);
  EXPECT_EQ(r.world_size(), 16);
  EXPECT_EQ(r.describe(), "pp 2 x dp_replicate 1 x dp_shard 4 x cp 1 x tp 2");
  EXPECT_EQ(ParallelDims{}.resolved(1).dp_shard, 1);
}

TEST(ParallelDims, AnyOneDimMayBeInferredInsteadOfDpShard) {
  ParallelDims d;
  d.dp_shard = 2;  // hybrid sharding: shard groups of 2, replicated as often as the world allows
  d.dp_replicate = -1;
  const ParallelDims r = d.resolved(8);
  EXPECT_EQ(r.dp_replicate, 4);
  EXPECT_EQ(r.dp(), 8);
  ParallelDims all_given;
  all_given.dp_shard = 2;
  all_given.cp = 2;
  EXPECT_EQ(all_given.resolved(4).world_size(), 4);
}

TEST(ParallelDims, ErrorsNameTheDimsTheirConfigKeysAndTheWorldSize) {
  ParallelDims d;
  d.dp_shard = 3;
  EXPECT_EQ(error_of(d, 4),
            "the parallel dims (parallel.pp, parallel.dp, parallel.cp, parallel.tp) span pp 1 x dp_replicate 1 x dp_shard 3 x cp 1 x "
            "tp 1 = 3 ranks, but the world size is 4");
  d = ParallelDims{};
  d.tp = 4;
  EXPECT_EQ(error_of(d, 6),
            "dp_shard (parallel.dp) is inferred from the world size 6, which the other dims (parallel.pp, parallel.cp, parallel.tp: "
            "pp 1 x dp_replicate 1 x cp 1 x tp 4 = 4) do not divide");
  d = ParallelDims{};
  d.pp = 8;
  EXPECT_EQ(error_of(d, 4),
            "dp_shard (parallel.dp) is inferred from the world size 4, which the other dims (parallel.pp, parallel.cp, parallel.tp: "
            "pp 8 x dp_replicate 1 x cp 1 x tp 1 = 8) do not divide");
  d = ParallelDims{};
  d.cp = 0;
  EXPECT_EQ(error_of(d, 4), "cp (parallel.cp) is 0; a parallel dim spans a whole number of ranks, at least 1");
  d = ParallelDims{};
  d.pp = -1;
  EXPECT_EQ(error_of(d, 4), "only one parallel dim may be inferred (-1), but pp (parallel.pp) and dp_shard (parallel.dp) both are");
}

TEST(ParallelDims, MeshDimsComeInOrderWithTheEnabledOnesNamed) {
  ParallelDims d;
  d.pp = 2;
  d.tp = 2;
  d = d.resolved(8);
  using Dims = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(d.mesh_dims(), (Dims{{"pp", 2}, {"dp_replicate", 1}, {"dp_shard", 2}, {"cp", 1}, {"tp", 2}}));
  EXPECT_EQ(d.enabled(), (std::vector<std::string>{"pp", "dp_shard", "tp"}));
  EXPECT_TRUE(d.enabled("tp"));
  EXPECT_FALSE(d.enabled("cp"));
  EXPECT_EQ(d.size("dp_shard"), 2);
  EXPECT_THROW(d.size("dp"), std::invalid_argument);  // a flattened group, not a dim
}

using Groups = std::vector<std::vector<int>>;

// The groups of each kind a mesh of these dims creates, by name.
std::map<std::string, Groups> plan_of(const ParallelDims& dims, int world) {
  std::map<std::string, Groups> by_name;
  for (const auto& kind : mesh_group_plan(resolve_mesh_dims(dims.resolved(world).mesh_dims(), world)))
    by_name[kind.name] = kind.groups;
  return by_name;
}

// 2 x 2 x 2: rank = 4 dp_replicate + 2 dp_shard + tp.
TEST(MeshMembership, TwoByTwoByTwoOfReplicasShardsAndTensorParallelRanks) {
  ParallelDims d;
  d.dp_replicate = 2;
  d.tp = 2;
  const auto plan = plan_of(d, 8);
  EXPECT_EQ(plan.at("tp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(plan.at("dp_shard"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(plan.at("dp_replicate"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(plan.at("pp"), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(plan.at("cp"), plan.at("pp"));
  // dp orders its members by (replica, shard): rank 6 is replica 1's shard 1, dp coordinate 3.
  EXPECT_EQ(plan.at("dp"), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(plan.at("dp_cp"), plan.at("dp"));
  EXPECT_EQ(plan.at("dp_shard_cp"), plan.at("dp_shard"));
}

// 2 x 2 x 2 of pipeline stages, shards and context-parallel ranks: rank = 4 pp + 2 dp_shard + cp.
TEST(MeshMembership, TwoByTwoByTwoOfStagesShardsAndContextParallelRanks) {
  ParallelDims d;
  d.pp = 2;
  d.cp = 2;
  const auto plan = plan_of(d, 8);
  EXPECT_EQ(plan.at("cp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(plan.at("dp_shard"), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(plan.at("dp"), plan.at("dp_shard"));
  EXPECT_EQ(plan.at("pp"), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(plan.at("dp_cp"), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(plan.at("dp_shard_cp"), plan.at("dp_cp"));
}

// 1 x 4 x 2 of stages, shards and tensor-parallel ranks: rank = 2 dp_shard + tp.
TEST(MeshMembership, OneByFourByTwoOfStagesShardsAndTensorParallelRanks) {
  ParallelDims d;
  d.tp = 2;
  const auto plan = plan_of(d, 8);
  EXPECT_EQ(plan.at("tp"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(plan.at("dp_shard"), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(plan.at("dp"), plan.at("dp_shard"));
  EXPECT_EQ(plan.at("dp_cp"), plan.at("dp_shard"));
  EXPECT_EQ(plan.at("dp_shard_cp"), plan.at("dp_shard"));
  EXPECT_EQ(plan.at("pp").size(), 8u);
}

// 1 x 4 x 2 of stages, replicas and shards (hybrid sharding, two ranks per shard group).
TEST(MeshMembership, OneByFourByTwoOfStagesReplicasAndShards) {
  ParallelDims d;
  d.dp_replicate = -1;
  d.dp_shard = 2;
  const auto plan = plan_of(d, 8);
  EXPECT_EQ(plan.at("dp_shard"), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(plan.at("dp_replicate"), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(plan.at("dp"), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(plan.at("dp_shard_cp"), plan.at("dp_shard"));
}

// Every rank creates the groups in one order: each dim's in mesh order, then the flattened ones.
TEST(MeshMembership, EveryMeshCreatesItsGroupsInOneOrder) {
  std::vector<std::string> order;
  for (const auto& kind : mesh_group_plan(resolve_mesh_dims(ParallelDims{}.resolved(4).mesh_dims(), 4))) order.push_back(kind.name);
  EXPECT_EQ(order, (std::vector<std::string>{"pp", "dp_replicate", "dp_shard", "cp", "tp", "dp", "dp_cp", "dp_shard_cp"}));
}

}  // namespace
}  // namespace dtrain

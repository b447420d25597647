// Communication-free logic of the comm layer: mesh layout and validation, the wording of a
// diagnosis, and a world of one.
#include <gtest/gtest.h>

#include "comm/collectives.h"
#include "comm/device_mesh.h"
#include "comm/hang_diagnosis.h"
#include "comm/world.h"

namespace dtrain {
namespace {

std::string error_of(const std::vector<std::pair<std::string, int>>& dims, int world) {
  try {
    resolve_mesh_dims(dims, world);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(DeviceMeshDims, InfersOneDimension) {
  auto dims = resolve_mesh_dims({{"pp", 2}, {"dp", -1}, {"tp", 2}}, 16);
  EXPECT_EQ(dims[1].size, 4);
}

TEST(DeviceMeshDims, ErrorsNameTheProblem) {
  EXPECT_NE(error_of({{"dp", 3}, {"tp", 2}}, 8).find("product of the dimensions is 6, but the world size is 8"),
            std::string::npos);
  EXPECT_NE(error_of({{"dp", -1}, {"tp", -1}}, 8).find("'dp' and 'tp' both are"), std::string::npos);
  EXPECT_NE(error_of({{"dp", 2}, {"dp", 2}}, 4).find("'dp' is empty or repeated"), std::string::npos);
  EXPECT_NE(error_of({{"dp", -1}, {"tp", 3}}, 8).find("not divisible"), std::string::npos);
  EXPECT_NE(error_of({{"tp", 0}}, 8).find("'tp' has size 0"), std::string::npos);
}

TEST(DeviceMeshGroups, RowMajorLinesAlongEachDimension) {
  std::vector<MeshDim> dims{{"pp", 2}, {"dp", 2}, {"tp", 2}};
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(mesh_groups(dims, 2), (G{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh_groups(dims, 1), (G{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh_groups(dims, 0), (G{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(DeviceMeshGroups, RanksAndCoordinatesAreRowMajor) {
  std::vector<MeshDim> dims{{"pp", 2}, {"dp", 3}, {"tp", 2}};
  EXPECT_EQ(mesh_rank(dims, {1, 2, 1}), 11);
  EXPECT_EQ(mesh_coords(dims, 9), (std::vector<int>{1, 1, 1}));
  for (int r = 0; r < 12; ++r) EXPECT_EQ(mesh_rank(dims, mesh_coords(dims, r)), r);
}

TEST(DeviceMeshGroups, AGroupOverSeveralDimsOrdersItsMembersRowMajorOverThem) {
  std::vector<MeshDim> dims{{"pp", 2}, {"dp", 2}, {"cp", 2}, {"tp", 2}};
  using G = std::vector<std::vector<int>>;
  EXPECT_EQ(mesh_groups(dims, std::vector<size_t>{1, 2}), (G{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(mesh_groups(dims, std::vector<size_t>{0, 3}), (G{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}}));
  EXPECT_EQ(mesh_groups(dims, std::vector<size_t>{}).size(), 16u);
  EXPECT_THROW(mesh_groups(dims, std::vector<size_t>{2, 1}), std::invalid_argument);
}

// Flattened groups come from the dims a mesh has; a mesh of other names (or with a dim named like
// one) has none.
TEST(DeviceMeshGroups, FlattenedGroupsSpanTheDimsTheMeshHas) {
  auto names = [](const std::vector<MeshDim>& dims) {
    std::vector<std::string> out;
    for (const auto& kind : mesh_group_plan(dims)) out.push_back(kind.name);
    return out;
  };
  using N = std::vector<std::string>;
  EXPECT_EQ(names({{"dp", 2}, {"tp", 2}}), (N{"dp", "tp"}));
  EXPECT_EQ(names({{"dp_shard", 2}, {"tp", 2}}), (N{"dp_shard", "tp", "dp", "dp_cp", "dp_shard_cp"}));
  const auto plan = mesh_group_plan({{"dp_shard", 2}, {"cp", 2}});
  EXPECT_EQ(plan[2].name, "dp");
  EXPECT_EQ(plan[2].groups, mesh_groups({{"dp_shard", 2}, {"cp", 2}}, 0));
  EXPECT_EQ(plan[3].name, "dp_cp");
  EXPECT_EQ(plan[3].groups, (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
}

TEST(DeviceMeshGroups, AWorldOfOneHasEveryDimAndGroupOfSizeOne) {
  auto world = World::init({}, derive_worker_env({}));
  DeviceMesh mesh(*world, {{"pp", 1}, {"dp_replicate", 1}, {"dp_shard", -1}, {"cp", 1}, {"tp", 1}});
  EXPECT_EQ(mesh.size("dp_cp"), 1);
  EXPECT_EQ(mesh.coord("dp"), 0);
  EXPECT_EQ(mesh.group("tp")->backend_name(), "none");
  const DeviceMesh dp = mesh.sub({"dp_replicate", "dp_shard"});
  EXPECT_EQ(dp.dims().size(), 2u);
  EXPECT_EQ(dp.rank_at({0, 0}), 0);
  EXPECT_THROW(mesh.sub({"tp", "pp"}), std::invalid_argument);     // not in mesh order
  EXPECT_THROW(mesh.sub({"dp", "dp_shard"}), std::invalid_argument);  // dp spans dp_shard already
  EXPECT_THROW(dp.group("tp"), std::invalid_argument);               // not in the view
  EXPECT_THROW(mesh.rank_at({0}), std::invalid_argument);
}

TEST(Diagnosis, RanksThatDidNotAnswerAreNamed) {
  FailedCollective f;
  f.group_key = "dp:0-2";
  f.group_name = "dp";
  f.ranks = {0, 1, 2};
  f.failing_rank = 0;
  f.op = {5, "all_reduce", {8}, "float32", "", OpState::Entered};
  f.backend_error = "Timed out";
  std::map<int, RankReport> reports;
  CollectiveLog log;
  log.add_group("dp:0-2", "dp", {0, 1, 2});
  log.record("dp:0-2", f.op);
  reports[0] = {true, false, log.to_json()};
  reports[1] = {true, false, log.to_json()};
  const std::string msg = explain_failure(f, reports);
  EXPECT_NE(msg.find("ranks 0-1 are waiting there"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 2 did not answer"), std::string::npos) << msg;
}

TEST(Diagnosis, FormatsRankRanges) {
  EXPECT_EQ(format_ranks({5, 0, 1, 2, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_ranks({3}), "3");
}

TEST(WorldOfOne, NeedsNoLauncherAndCollectivesAreIdentities) {
  auto world = World::init({}, derive_worker_env({}));
  EXPECT_EQ(world->size(), 1);
  Group& g = *world->world_group();
  at::Tensor t = at::arange(5, at::kFloat);
  all_reduce(g, t, ReduceOp::Avg);
  EXPECT_TRUE(at::equal(t, at::arange(5, at::kFloat)));
  EXPECT_TRUE(at::equal(all_gather(g, t), t));
  EXPECT_TRUE(at::equal(reduce_scatter(g, t), t));
  barrier(g);
}

TEST(WorldOptions, UnknownBackendIsNamed) {
  WorldOptions o;
  o.backend = "mpi";
  try {
    World::init(o, derive_worker_env({}));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dist.backend='mpi'"), std::string::npos);
  }
}

}  // namespace
}  // namespace dtrain

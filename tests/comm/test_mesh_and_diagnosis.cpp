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

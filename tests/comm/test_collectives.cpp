// Collectives on 2, 3 and 4 real ranks under `dtrain launch`, mesh sub-groups, and the diagnosis
// a rank gets when another skips a collective or calls a different one.
#include <gtest/gtest.h>

#include "support/process.h"

namespace dtrain::test {
namespace {

ProcessResult run_ranks(int n, const std::string& scenario, const std::string& timeout_ms = "60000") {
  return run_process({DTRAIN_BIN, "launch", "--nproc-per-node", std::to_string(n), "--grace-period", "1", "--",
                      std::string(DTRAIN_TEST_BIN_DIR) + "/worker_collectives", scenario, timeout_ms},
                     90);
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, MatchClosedFormsForOddSizesAndDtypes) {
  const int n = GetParam();
  auto r = run_ranks(n, "collectives");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < n; ++rank)
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] PASS collectives")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 3, 4));

TEST(MeshGroups, ReduceExactlyTheirMembersOnATwoByTwoMesh) {
  auto r = run_ranks(4, "mesh");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] PASS mesh")) << r.output;
}

TEST(HangDiagnosis, SkippedCollectiveNamesTheRankThatNeverArrived) {
  auto r = run_ranks(4, "skip", "2000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(contains(r.output, "all_reduce #2 on group world (ranks 0-3) failed on rank ")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 3 never entered all_reduce #2; rank 3's last op on group world was "
                                 "broadcast #1 [10] float32 'first'"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "ranks 0-2 are waiting there")) << r.output;
  EXPECT_TRUE(contains(r.output, "Timed out waiting 2000ms")) << r.output;
}

TEST(HangDiagnosis, DifferentCollectivesAtOnePointAreAMismatch) {
  auto r = run_ranks(2, "mismatch", "2000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(contains(r.output, "mismatch at #2 on group world")) << r.output;
  EXPECT_TRUE(contains(r.output, "all_reduce #2 [1000] float32 'right op'")) << r.output;
  EXPECT_TRUE(contains(r.output, "broadcast #2 [10] float32 'wrong op'")) << r.output;
}

}  // namespace
}  // namespace dtrain::test

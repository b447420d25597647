// Collectives on 2, 3 and 4 real ranks under `dtrain launch`, mesh sub-groups, and the diagnosis
// a rank gets when another skips a collective or calls a different one.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <regex>
#include <thread>

#include "launch/worker_env.h"
#include "support/process.h"
#include "support/small_tmpfs.h"

namespace dtrain::test {
namespace {

ProcessResult run_ranks(int n, const std::string& scenario, const std::string& timeout_ms = "60000",
                        const std::string& backend = "auto", const std::string& shm_chunk_bytes = "524288") {
  return run_process({DTRAIN_BIN, "launch", "--nproc-per-node", std::to_string(n), "--grace-period", "1", "--",
                      std::string(DTRAIN_TEST_BIN_DIR) + "/worker_collectives", scenario, timeout_ms, backend,
                      shm_chunk_bytes},
                     180);
}

void expect_all_pass(const ProcessResult& r, int n, const std::string& scenario) {
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < n; ++rank)
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] PASS " + scenario)) << r.output;
}

// The names in /dev/shm that a job with this rendezvous port left behind.
std::vector<std::string> leftover_segments(int port) {
  const std::string prefix = shared_memory_prefix("127.0.0.1", port, 0);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix, 0) == 0) left.push_back(e.path().string());
  return left;
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

// Every collective, dtype and reduction through shared-memory buffers of 4 KiB, so that most sizes
// take many steps through both halves, on the world and on sub-groups.
class SharedMemorySweep : public ::testing::TestWithParam<int> {};

TEST_P(SharedMemorySweep, EveryCollectiveDtypeAndOpMatchesItsClosedFormAcrossManyBufferSteps) {
  const int n = GetParam();
  expect_all_pass(run_ranks(n, "sweep", "60000", "auto", "4096"), n, "sweep");
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedMemorySweep, ::testing::Values(1, 2, 3, 4));

TEST(SharedMemorySweep, TheDefaultBuffersAndGlooAgreeWithTheSameClosedForms) {
  expect_all_pass(run_ranks(3, "sweep"), 3, "sweep");
  expect_all_pass(run_ranks(2, "sweep", "60000", "gloo"), 2, "sweep");
}

// Two agents on loopback are two nodes of two ranks. The world, and the world in reverse order,
// span both nodes with two members on each, so they run in two levels (shared memory within a
// node, Gloo across); the even ranks (one per node) and ranks 1-3 (uneven) fall back to Gloo. Every
// group must meet the closed forms a single node meets.
TEST(Hierarchical, TwoNodesMeetTheClosedFormsOfOneNode) {
  const int port = free_port();
  auto node = [&](int k) {
    return std::async(std::launch::async, [=] {
      return run_process({DTRAIN_BIN, "launch", "--nnodes", "2", "--node-rank", std::to_string(k), "--nproc-per-node",
                          "2", "--master-port", std::to_string(port), "--rdzv-timeout", "60", "--grace-period", "1",
                          "--", std::string(DTRAIN_TEST_BIN_DIR) + "/worker_collectives", "sweep", "60000", "auto",
                          "4096"},
                         240);
    });
  };
  auto node0 = node(0), node1 = node(1);
  const ProcessResult r0 = node0.get(), r1 = node1.get();
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  const std::string out = r0.output + r1.output;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    EXPECT_TRUE(contains(out, tag + "PASS sweep")) << out;
    EXPECT_TRUE(contains(out, tag + "group world backend shm+gloo")) << out;
    EXPECT_TRUE(contains(out, tag + "group reversed backend shm+gloo")) << out;
  }
  EXPECT_TRUE(contains(out, "[rank 2] group even backend gloo")) << out;
  EXPECT_TRUE(contains(out, "[rank 3] group rest backend gloo")) << out;
}

// Two ranks started directly (no agent to stop the survivor): the last one is killed inside a
// 64 MiB all-reduce, and the other must fail naming it, long before its 60 s timeout.
TEST(SharedMemory, ARankKilledInsideAnAllReduceFailsTheOthersByNameAndLeavesNoSegment) {
  const int port = free_port();
  ProcessResult results[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      results[r] = run_process({std::string(DTRAIN_TEST_BIN_DIR) + "/worker_collectives", "killed", "60000"}, 50,
                               {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r), "WORLD_SIZE=2",
                                "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)});
    });
  for (auto& t : ranks) t.join();
  EXPECT_NE(results[1].exit_code, 0);
  const ProcessResult& survivor = results[0];
  EXPECT_NE(survivor.exit_code, 0);
  EXPECT_FALSE(survivor.timed_out) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "all_reduce #2 on group world (ranks 0-1) failed on rank 0")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "rank 1 (pid ")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, ") exited during shared-memory all_reduce #2 of 16777216 float32 elements"))
      << survivor.output;
  EXPECT_TRUE(leftover_segments(port).empty());
}

// A /dev/shm smaller than a group's segment (two ranks need 4 MiB; here 1 MiB, in a mount namespace
// of the job's own) used to kill a rank with SIGBUS at the first collective that reached past it.
// Creating the segment now fails naming /dev/shm, the bytes and the way out, and rank 1, which only
// waits for the segment, learns why from the store long before its 60 s timeout. The ranks are
// started directly (no agent to stop the one that is left), so each one's exit shows.
TEST(SharedMemory, ADevShmTooSmallIsNamedWithTheBytesNeededInsteadOfASigbus) {
  if (const std::string why = small_dev_shm_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string ranks =
      "RANK=0 LOCAL_RANK=0 \"$0\" collectives 60000 & RANK=1 LOCAL_RANK=1 \"$0\" collectives 60000; one=$?; "
      "wait $!; echo \"exit codes: $? $one\"";
  const ProcessResult r = run_process(with_small_dev_shm(1 << 20, {"sh", "-c", ranks, std::string(DTRAIN_TEST_BIN_DIR) + "/worker_collectives"}), 50,
                                      {"WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(free_port())});
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_TRUE(contains(r.output, "exit codes: 1 1")) << r.output;  // a SIGBUS is 135
  const std::regex named("ERROR rank 0: .*/dev/shm is too small for the shared-memory backend: segment /dev/shm/dtrain-[^ ]+ needs "
                         "[0-9]+ bytes and [0-9]+ are free; enlarge /dev/shm \\(a container's --shm-size\\) or use dist.backend=gloo");
  EXPECT_TRUE(std::regex_search(r.output, named)) << r.output;
  EXPECT_TRUE(contains(r.output, "ERROR rank 1: creating process group world (ranks 0-1) failed: rank 0 (the group's first) could not create the "
                                 "group's shared memory: /dev/shm is too small"))
      << r.output;
}

TEST(MeshGroups, ReduceExactlyTheirMembersOnATwoByTwoMesh) {
  auto r = run_ranks(4, "mesh");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(contains(r.output, "[rank " + std::to_string(rank) + "] PASS mesh")) << r.output;
}

TEST(MeshGroups, EveryDimAndFlattenedGroupOfATwoByTwoByTwoMeshReducesExactlyItsMembers) {
  expect_all_pass(run_ranks(8, "parallel_mesh"), 8, "parallel_mesh");
}

// The differentiable mappings' forward values and input gradients against closed forms in the
// group rank and size, over the world and over sub-groups, and their size-1 shortcut.
class Mappings : public ::testing::TestWithParam<int> {};

TEST_P(Mappings, ForwardAndBackwardMatchClosedForms) {
  const int n = GetParam();
  expect_all_pass(run_ranks(n, "mappings"), n, "mappings");
}

INSTANTIATE_TEST_SUITE_P(Ranks, Mappings, ::testing::Values(2, 4));

TEST(HangDiagnosis, ATimeoutOnAFlattenedMeshGroupNamesIt) {
  auto r = run_ranks(4, "skip_dp_cp", "2000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(contains(r.output, "all_reduce #2 on group dp_cp (ranks 0-3) failed on rank ")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 3 never entered all_reduce #2; rank 3's last op on group dp_cp was ")) << r.output;
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

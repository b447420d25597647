// A job whose members do not all meet: two agents that claim one node rank, a node 0 that never comes
// up, a rank whose partner never starts. Each ends with one line that says what was awaited and where.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <future>
#include <sstream>

#include "launch/launch_test_cli.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// c10d's logs of a failed connection carry the C++ backtrace of its error.
bool has_backtrace(const std::string& output) {
  return contains(output, "frame #") || contains(output, "[c10d]") || contains(output, "Exception raised from");
}

int count_lines(const std::string& text) {
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line);) ++n;
  return n;
}

// The repro: a second agent given node rank 1 joined the job beside the first and both ran workers.
TEST(Rendezvous, ASecondAgentWithTheSameNodeRankIsRefusedNamingBoth) {
  const int port = free_port();
  const std::string marker = unique_marker("dup_node_rank");
  const std::string ready = scratch_dir("dup_node_rank_ready");
  auto node = [&](int rank) {
    return std::async(std::launch::async, [=] {
      return run_process(launch({"--nnodes", "2", "--node-rank", std::to_string(rank), "--master-port", std::to_string(port),
                                 "--rdzv-timeout", "20", "--grace-period", "1"},
                                {kSleeper, "60", marker}),
                         60, {"WORKER_READY_DIR=" + ready});
    });
  };
  auto node0 = node(0);
  auto first = node(1);
  // Both nodes' workers run: the first node 1 has claimed its rank.
  ASSERT_TRUE(wait_for([&] { return fs::exists(ready + "/0") && fs::exists(ready + "/1"); }, 30));
  const int first_pid = parent_pid(std::stoi(read_text(ready + "/1")));
  const ProcessResult second =
      run_process(launch({"--nnodes", "2", "--node-rank", "1", "--master-port", std::to_string(port), "--rdzv-timeout", "20"},
                         {kSleeper, "60", marker}),
                  20);
  for (int pid : processes_with_markers({std::string(1, '\0') + "launch" + std::string(1, '\0'), marker}))
    if (parent_pid(pid) == getpid()) ::kill(pid, SIGTERM);
  node0.get();
  first.get();
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_TRUE(contains(second.output, "error: --node-rank 1 is taken: the agent pid " + std::to_string(first_pid) +
                                          " on host "))
      << second.output;
  EXPECT_TRUE(contains(second.output, "joined the job as node 1 before this one (pid ")) << second.output;
  EXPECT_FALSE(contains(second.output, "[rank ")) << "the second agent started workers:\n" << second.output;
  EXPECT_FALSE(process_with_marker_alive(marker));
}

// The repro: an agent of node 1 whose node 0 never came printed c10d's connection attempts, each with
// its stack trace, before its own message.
TEST(Rendezvous, AMissingNodeZeroIsOneLineSayingWhatWasAwaitedAndWhere) {
  const std::string port = std::to_string(free_port());
  auto r = run_process(launch({"--nnodes", "2", "--node-rank", "1", "--master-port", port, "--rdzv-timeout", "1"}, {"true"}), 30);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "dtrain launch: error: waited 1s (--rdzv-timeout) for node 0's rendezvous store at 127.0.0.1:" +
                                     port + " (--master-addr, --master-port): "))
      << r.output;
  EXPECT_FALSE(has_backtrace(r.output)) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
}

const std::vector<std::string> kTinyTrain{kBin, "train", "--set", "model.preset=tiny", "--set", "dist.timeout_s=2"};

// The repro: rank 0 of a world of 2 whose rank 1 never started waited out the timeout inside c10d and
// died with a store timeout and its backtrace, saying nothing of rank 1.
TEST(Rendezvous, ALoneRankNamesTheRanksItWaitsForAndTimesOut) {
  const std::string port = std::to_string(free_port());
  const std::string run_dir = scratch_dir("lone_rank") + "/run";
  std::vector<std::string> argv = kTinyTrain;
  argv.insert(argv.end(), {"--set", "train.run_dir=" + run_dir});
  auto r = run_process(argv, 60, {"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=" + port, "OMP_NUM_THREADS=1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain train: error: rank 0: waiting for rank 1 of a world of 2 to join at 127.0.0.1:" +
                                     port + " (MASTER_ADDR:MASTER_PORT): timed out after 2s (dist.timeout_s)"))
      << r.output;
  EXPECT_FALSE(has_backtrace(r.output)) << r.output;
  EXPECT_FALSE(fs::exists(run_dir));
}

// Where torchrun's contract says how many ranks each node runs, the missing ranks' nodes are named
// too: rank 0 of a world of 4 on two nodes of 2, alone.
TEST(Rendezvous, TheMissingRanksNodesAreNamedWhenTheLauncherSaysWhichNodeIsWhich) {
  const std::string port = std::to_string(free_port());
  auto r = run_process(kTinyTrain, 60,
                       {"RANK=0", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0", "MASTER_PORT=" + port, "OMP_NUM_THREADS=1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0: waiting for ranks 1-3 (nodes 0-1) of a world of 4 to join at 127.0.0.1:" + port))
      << r.output;
}

// The repro: a rank whose rank 0 never started (no store to reach) printed c10d's stack traces.
TEST(Rendezvous, ARankThatCannotReachTheStoreSaysSoInOneLine) {
  const std::string port = std::to_string(free_port());
  auto r = run_process(kTinyTrain, 60, {"RANK=1", "WORLD_SIZE=2", "MASTER_PORT=" + port, "OMP_NUM_THREADS=1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain train: error: rank 1: waited 2s (dist.timeout_s) for rank 0's rendezvous store at 127.0.0.1:" +
                                     port + " (MASTER_ADDR:MASTER_PORT): "))
      << r.output;
  EXPECT_FALSE(has_backtrace(r.output)) << r.output;
}

}  // namespace
}  // namespace dtrain::test

// A whole multi-node job from one command. Every "host" here is this machine, reached through the
// remote-shell hook (`--remote-shell "sh -c"`), so these run everywhere; test_ssh_launch.cpp does the
// same through a real sshd. Output comes back with each host's name, failures end every host, and a
// stopped launcher leaves no process behind on any host.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>

#include "launch/launch_test_cli.h"
#include "launch/multi_node_test_job.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// Two "hosts" on this machine, reached by `sh -c`, meeting at a free loopback port.
std::vector<std::string> two_local_hosts(const std::string& hostfile) {
  return {"--hostfile", hostfile, "--remote-shell", "sh -c", "--master-addr", "127.0.0.1",
          "--master-port", std::to_string(free_port()), "--rdzv-timeout", "60"};
}

std::string write_hostfile(const std::string& name, int slots) {
  const std::string file = scratch_dir(name) + "/hostfile";
  std::ofstream(file) << "# two hosts\nhostA slots=" << slots << "\nhostB slots=" << slots << "\n";
  return file;
}

TEST(MultiNodeLaunch, EveryHostRunsItsNodeAndItsOutputComesBackUnderItsName) {
  const auto r = run_process(
      launch(two_local_hosts(write_hostfile("hook_env", 2)),
             {"sh", "-c", "echo rank $RANK of $WORLD_SIZE on node $GROUP_RANK, store $MASTER_ADDR, forwarded $DTRAIN_TEST_VALUE"}),
      60, {"DTRAIN_TEST_VALUE=yes"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain launch: 2 nodes × 2 ranks on hostA, hostB")) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string host = rank < 2 ? "hostA" : "hostB";
    EXPECT_TRUE(contains(r.output, "[" + host + "] [rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                                       " of 4 on node " + std::to_string(rank / 2) + ", store 127.0.0.1, forwarded yes"))
        << r.output;
  }
  EXPECT_TRUE(contains(r.output, "[hostB] dtrain launch: the job succeeded")) << r.output;
}

TEST(MultiNodeLaunch, AFailedRankOnOneHostStopsEveryHostAndFailsTheLauncher) {
  const std::string marker = unique_marker("hook_fail");
  const std::string ready = scratch_dir("hook_fail_ready");
  // Rank 3 fails once the three others run, so hostA has live workers to stop.
  const auto r = run_process(
      launch(two_local_hosts(write_hostfile("hook_fail", 2)),
             {"sh", "-c", "if [ $RANK = 3 ]; then while [ $(ls " + ready + " | grep -vc tmp) -lt 3 ]; do sleep 0.02; done; "
                          "echo giving up; exit 3; fi; WORKER_READY_DIR=" + ready + " exec " + kSleeper + " 60 " + marker}),
      90);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "[hostB] [rank 3] giving up")) << r.output;
  EXPECT_TRUE(contains(r.output, "[hostB] dtrain launch: rank 3 failed: exit code 3")) << r.output;
  EXPECT_TRUE(contains(r.output, "'s agent failed (exit code 1); stopping the agents on every host")) << r.output;
  EXPECT_FALSE(process_with_marker_alive(marker)) << r.output;
}

// A remote shell that fails as ssh does when it cannot connect: its exit code is the job's.
TEST(MultiNodeLaunch, AHostThatCannotBeReachedFailsTheJobWithItsExitCode) {
  const std::string unreachable = scratch_dir("hook_unreachable") + "/ssh";
  std::ofstream(unreachable) << "#!/bin/sh\necho \"ssh: connect to host $1 port 22: Connection refused\" >&2\nexit 255\n";
  std::filesystem::permissions(unreachable, std::filesystem::perms::owner_all);
  const auto r = run_process(launch({"--hosts", "hostA", "--remote-shell", unreachable + " {host}"}, {"true"}), 60);
  EXPECT_EQ(r.exit_code, 255) << r.output;
  EXPECT_TRUE(contains(r.output, "[hostA] ssh: connect to host hostA port 22: Connection refused")) << r.output;
  EXPECT_TRUE(contains(r.output, "host hostA's agent failed (exit code 255)")) << r.output;
}

TEST(MultiNodeLaunch, CtrlCLeavesNoProcessOnAnyHost) {
  const std::string marker = unique_marker("hook_sigint");
  auto job = start_multi_node_job(marker, two_local_hosts(write_hostfile("hook_sigint", 2)), 4);
  ASSERT_GT(job.launcher, 0) << job.result.get().output;
  ::kill(job.launcher, SIGINT);
  const auto r = job.result.get();
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain launch: stopped by signal 2; stopping the agents on every host")) << r.output;
  EXPECT_TRUE(host_agent_stopped(r.output, "hostA", "dtrain launch")) << r.output;
  EXPECT_TRUE(host_agent_stopped(r.output, "hostB", "dtrain launch")) << r.output;
  expect_all_gone(job, marker);
}

TEST(MultiNodeLaunch, AKilledLauncherLeavesNoProcessOnAnyHost) {
  const std::string marker = unique_marker("hook_sigkill");
  auto job = start_multi_node_job(marker, two_local_hosts(write_hostfile("hook_sigkill", 2)), 4);
  ASSERT_GT(job.launcher, 0) << job.result.get().output;
  ::kill(job.launcher, SIGKILL);
  EXPECT_EQ(job.result.get().signal, SIGKILL);
  expect_all_gone(job, marker);
}

// 2 hosts × 2 ranks of real training, started by `dtrain run`: each host trains its two ranks of one
// world, and the run ends on both.
TEST(MultiNodeRun, TinyTrainingOnTwoHosts) {
  const std::string dir = scratch_dir("hook_train") + "/run";
  std::vector<std::string> argv{kBin, "run"};
  for (auto& flag : two_local_hosts(write_hostfile("hook_train_hosts", 2))) argv.push_back(flag);
  for (const char* set : {"model.preset=tiny", "train.steps=4"}) argv.insert(argv.end(), {"--set", set});
  argv.insert(argv.end(), {"--set", "train.run_dir=" + dir, "--prompt", "The "});
  const auto r = run_process(argv, 170, {"OMP_NUM_THREADS=1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain run: 2 nodes × 2 ranks on hostA, hostB")) << r.output;
  // Rank 0 alone prints; hostB's ranks show in the world size and in their own logs.
  EXPECT_TRUE(contains(r.output, "[hostA] [rank 0] dtrain train: rank 0 of 4")) << r.output;
  EXPECT_TRUE(contains(r.output, "[hostB] dtrain launch: the job succeeded")) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/rank-3.log")) << r.output;
  EXPECT_TRUE(contains(r.output, "[hostA] sample from ")) << r.output;
  EXPECT_FALSE(contains(r.output, "[hostB] sample from ")) << "only node 0 samples\n" << r.output;
  EXPECT_TRUE(contains(read_text(dir + "/launch-node1.log"), "node 1 of 2, 2 workers")) << r.output;
  std::ifstream metrics(dir + "/metrics.jsonl");
  int steps = 0;
  for (std::string line; std::getline(metrics, line);) steps += contains(line, "\"loss\"");
  EXPECT_EQ(steps, 4) << read_text(dir + "/metrics.jsonl");
}

TEST(MultiNodeRun, SigintToDtrainRunLeavesNoTrainerOnAnyHost) {
  const std::string dir = scratch_dir("hook_train_sigint") + "/run";
  std::vector<std::string> argv{kBin, "run"};
  for (auto& flag : two_local_hosts(write_hostfile("hook_train_sigint_hosts", 2))) argv.push_back(flag);
  for (const char* set : {"model.preset=tiny", "train.steps=1000000"}) argv.insert(argv.end(), {"--set", set});
  argv.insert(argv.end(), {"--set", "train.run_dir=" + dir, "--no-sample"});
  auto result = std::async(std::launch::async, [&] { return run_process(argv, 170, {"OMP_NUM_THREADS=1"}); });
  // A step is logged once every rank of both hosts has taken part in it.
  const bool stepping = wait_for([&] { return contains(read_text(dir + "/metrics.jsonl"), "\"loss\""); }, 150);
  const int launcher = stepping ? launcher_pid("train.run_dir=" + dir, "run") : 0;
  ASSERT_GT(launcher, 0) << result.get().output;
  ::kill(launcher, SIGINT);
  const auto r = result.get();
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_TRUE(host_agent_stopped(r.output, "hostB", "dtrain launch")) << r.output;
  // Every process of the job (the hosts' `dtrain run`, their watchdogs, their trainers) names the run directory.
  EXPECT_TRUE(processes_with_markers({"train.run_dir=" + dir}).empty()) << r.output;
}

}  // namespace
}  // namespace dtrain::test

// `dtrain launch` as users meet it: the env contract, failures, restarts, two agents, signals and bad
// input — all with real processes on loopback.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <sstream>

#include "launch/launch_test_cli.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// Each worker prints its contract; returns rank -> the variables it saw.
std::map<int, std::map<std::string, std::string>> env_by_rank(const std::string& output) {
  static const char* kVars[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                                "MASTER_ADDR", "MASTER_PORT", "DTRAIN_RESTART_COUNT", "DTRAIN_AGENT_STORE",
                                "OMP_NUM_THREADS"};
  std::map<int, std::map<std::string, std::string>> out;
  std::istringstream lines(output);
  std::string line;
  std::regex re(R"(\[rank (\d+)\] ENV (.*))");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    std::istringstream values(m[2].str());
    for (const char* v : kVars) values >> out[std::stoi(m[1].str())][v];
  }
  return out;
}

const std::string kPrintEnv =
    "echo ENV $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $ROLE_RANK $MASTER_ADDR $MASTER_PORT "
    "$DTRAIN_RESTART_COUNT $DTRAIN_AGENT_STORE $OMP_NUM_THREADS";

class EnvContract : public ::testing::TestWithParam<int> {};

TEST_P(EnvContract, EveryWorkerGetsTorchrunsVariables) {
  const int n = GetParam();
  auto r = run_process(launch({"--nproc-per-node", std::to_string(n)}, {"sh", "-c", kPrintEnv}), 30,
                       {"OMP_NUM_THREADS="});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto env = env_by_rank(r.output);
  ASSERT_EQ(static_cast<int>(env.size()), n) << r.output;
  for (int rank = 0; rank < n; ++rank) {
    auto& e = env[rank];
    EXPECT_EQ(e["RANK"], std::to_string(rank));
    EXPECT_EQ(e["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(e["WORLD_SIZE"], std::to_string(n));
    EXPECT_EQ(e["LOCAL_WORLD_SIZE"], std::to_string(n));
    EXPECT_EQ(e["GROUP_RANK"], "0");
    EXPECT_EQ(e["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(e["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(e["MASTER_PORT"], env[0]["MASTER_PORT"]);  // one free port, picked by the agent
    EXPECT_GT(std::stoi(e["MASTER_PORT"]), 0);
    EXPECT_EQ(e["DTRAIN_RESTART_COUNT"], "0");
    EXPECT_EQ(e["DTRAIN_AGENT_STORE"], "1");
    EXPECT_EQ(e["OMP_NUM_THREADS"], "1");
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, EnvContract, ::testing::Values(1, 3, 4));

TEST(Launch, WorkerExitCodeStopsTheJobAndNamesTheRank) {
  const std::string marker = unique_marker("exit3");
  auto r = run_process(launch({"--nproc-per-node", "3", "--grace-period", "2"},
                              {"sh", "-c", "if [ $RANK = 1 ]; then echo about to fail; exit 3; fi; exec " + kSleeper +
                                               " 30 " + marker}),
                       30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(contains(r.output, "rank 1 failed: exit code 3")) << r.output;
  EXPECT_TRUE(contains(r.output, "last lines of rank 1:\n  | about to fail")) << r.output;
  EXPECT_FALSE(process_with_marker_alive(marker));
}

TEST(Launch, KilledWorkerIsReportedWithItsSignal) {
  const std::string marker = unique_marker("sigkill");
  auto r = run_process(
      launch({"--nproc-per-node", "2"}, {"sh", "-c", "if [ $RANK = 0 ]; then kill -9 $$; fi; exec " + kSleeper + " 30 " + marker}),
      30);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "rank 0 failed: signal 9 (SIGKILL)")) << r.output;
  EXPECT_FALSE(process_with_marker_alive(marker));
}

// dtrain ignores SIGPIPE; the programs it starts must not inherit that (an ignored signal stays
// ignored across exec): a shell sent SIGPIPE dies of it.
TEST(Launch, WorkersGetSigpipeBackAtItsDefault) {
  auto r = run_process(launch({"--nproc-per-node", "1"}, {"sh", "-c", "kill -PIPE $$; echo still alive"}), 30);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 failed: signal 13 (SIGPIPE)")) << r.output;
  EXPECT_FALSE(contains(r.output, "still alive")) << r.output;
}

TEST(Launch, RestartsTheWholeGroupThenSucceeds) {
  auto r = run_process(launch({"--nproc-per-node", "2", "--max-restarts", "2"},
                              {"sh", "-c",
                               "if [ $RANK = 1 ] && [ $DTRAIN_RESTART_COUNT = 0 ]; then exit 3; fi; "
                               "echo done restart=$DTRAIN_RESTART_COUNT"}),
                       30);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "restarting the job (restart 1 of 2)")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 0] done restart=1")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 1] done restart=1")) << r.output;
}

TEST(Launch, GivesUpWhenRestartsAreSpent) {
  auto r = run_process(launch({"--nproc-per-node", "2", "--max-restarts", "1"}, {"sh", "-c", "exit 4"}), 30);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "giving up after 1 restart (--max-restarts 1)")) << r.output;
}

std::future<ProcessResult> start_node(int node, int port, const std::vector<std::string>& extra,
                                      const std::vector<std::string>& program) {
  std::vector<std::string> flags{"--nnodes", "2", "--node-rank", std::to_string(node), "--nproc-per-node", "2",
                                 "--master-port", std::to_string(port), "--rdzv-timeout", "20"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return std::async(std::launch::async, [=] { return run_process(launch(flags, program), 60); });
}

TEST(Launch, TwoAgentsFormOneWorld) {
  const int port = free_port();
  auto node0 = start_node(0, port, {}, {"sh", "-c", kPrintEnv});
  auto node1 = start_node(1, port, {}, {"sh", "-c", kPrintEnv});
  auto r0 = node0.get(), r1 = node1.get();
  ASSERT_EQ(r0.exit_code, 0) << r0.output;
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  auto env = env_by_rank(r0.output + r1.output);
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(env[3]["GROUP_RANK"], "1");
  EXPECT_EQ(env[3]["LOCAL_RANK"], "1");
  EXPECT_EQ(env[3]["WORLD_SIZE"], "4");
  EXPECT_EQ(env[2]["MASTER_PORT"], std::to_string(port));
}

TEST(Launch, AWorkerDyingOnOneNodeStopsBothNodes) {
  const int port = free_port();
  const std::string marker = unique_marker("twonodes");
  const std::string ready = scratch_dir("twonodes_ready");
  // Rank 3 fails once the three others run, so node 0 has live workers to stop.
  const std::vector<std::string> program{
      "sh", "-c", "if [ $RANK = 3 ]; then while [ $(ls " + ready + " | wc -l) -lt 3 ]; do sleep 0.02; done; exit 3; fi; "
                  "WORKER_READY_DIR=" + ready + " exec " + kSleeper + " 30 " + marker};
  auto node0 = start_node(0, port, {"--grace-period", "2"}, program);
  auto node1 = start_node(1, port, {"--grace-period", "2"}, program);
  auto r0 = node0.get(), r1 = node1.get();
  EXPECT_EQ(r1.exit_code, 1) << r1.output;
  EXPECT_TRUE(contains(r1.output, "rank 3 failed: exit code 3")) << r1.output;
  EXPECT_EQ(r0.exit_code, 1) << r0.output;
  EXPECT_TRUE(contains(r0.output, "the job failed elsewhere: node 1: rank 3 failed: exit code 3")) << r0.output;
  EXPECT_FALSE(process_with_marker_alive(marker));
}

TEST(Launch, TwoNodesRestartTogether) {
  const int port = free_port();
  const std::vector<std::string> program{
      "sh", "-c", "if [ $RANK = 2 ] && [ $DTRAIN_RESTART_COUNT = 0 ]; then exit 3; fi; echo ok=$DTRAIN_RESTART_COUNT"};
  auto node0 = start_node(0, port, {"--max-restarts", "1"}, program);
  auto node1 = start_node(1, port, {"--max-restarts", "1"}, program);
  auto r0 = node0.get(), r1 = node1.get();
  EXPECT_EQ(r0.exit_code, 0) << r0.output;
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  EXPECT_TRUE(contains(r0.output, "[rank 0] ok=1")) << r0.output;
  EXPECT_TRUE(contains(r1.output, "[rank 2] ok=1")) << r1.output;
}

struct RunningJob {
  std::future<ProcessResult> result;
  int agent = 0;      // the launcher's pid; 0 if the workers did not all start
  std::string ready;  // WORKER_READY_DIR: each sleeper's pid, in a file named by its rank
};

// Starts `dtrain launch FLAGS -- PROGRAM` with WORKER_READY_DIR set to a fresh directory, and returns
// once `sleepers` worker_sleep processes run (each has written its file there).
RunningJob start_job(const std::string& marker, const std::vector<std::string>& flags,
                     const std::vector<std::string>& program, int sleepers) {
  RunningJob job;
  job.ready = scratch_dir(marker + "_ready");
  job.result = std::async(std::launch::async, [argv = launch(flags, program), ready = job.ready] {
    return run_process(argv, 60, {"WORKER_READY_DIR=" + ready});
  });
  // A sleeper writes NAME.tmp and renames it to NAME: only the renamed files say it runs.
  const auto started = [&] {
    return std::count_if(fs::directory_iterator(job.ready), {}, [](const fs::directory_entry& e) { return e.path().extension() != ".tmp"; });
  };
  const bool running = wait_for([&] { return started() == sleepers; }, 30);
  job.agent = running ? launcher_pid(marker) : 0;
  return job;
}

// An agent with two sleeping workers.
RunningJob start_sleeping_job(const std::string& marker, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> all{"--nproc-per-node", "2"};
  all.insert(all.end(), flags.begin(), flags.end());
  return start_job(marker, all, {kSleeper, "30", marker}, 2);
}

TEST(Launch, AgentStoppedBySigtermLeavesNoWorker) {
  const std::string marker = unique_marker("sigterm");
  auto job = start_sleeping_job(marker);
  ASSERT_GT(job.agent, 0) << job.result.get().output;
  ::kill(job.agent, SIGTERM);
  const auto r = job.result.get();
  EXPECT_EQ(r.exit_code, 143) << r.output;
  EXPECT_TRUE(contains(r.output, "stopped by signal 15")) << r.output;
  EXPECT_FALSE(process_with_marker_alive(marker));
}

TEST(Launch, KilledAgentTakesItsWorkersWithIt) {
  const std::string marker = unique_marker("agentkill");
  auto job = start_sleeping_job(marker);
  ASSERT_GT(job.agent, 0) << job.result.get().output;
  ::kill(job.agent, SIGKILL);
  const auto r = job.result.get();
  EXPECT_EQ(r.signal, SIGKILL) << r.output;
  // The workers learn of their parent's death from the kernel (PR_SET_PDEATHSIG): wait for it.
  EXPECT_TRUE(wait_for([&] { return !process_with_marker_alive(marker); }, 30)) << r.output;
}

// The repro of the orphan: the worker is a wrapper script and the program it started is no child of
// the agent, so the parent-death signal never reaches it; the watchdog must.
TEST(Launch, KilledAgentTakesWhatAWrapperStartedWithIt) {
  const std::string marker = unique_marker("grandchild");
  auto job = start_job(marker, {"--nproc-per-node", "1"}, {"sh", "-c", kSleeper + " 60 " + marker + " & wait"}, 1);
  ASSERT_GT(job.agent, 0) << job.result.get().output;
  std::ifstream ready(job.ready + "/0");
  int grandchild = 0;
  ready >> grandchild;
  ASSERT_GT(grandchild, 0);
  ASSERT_NE(parent_pid(grandchild), job.agent) << "the program must not be one of the agent's own workers";
  ::kill(job.agent, SIGKILL);
  const auto r = job.result.get();
  EXPECT_EQ(r.signal, SIGKILL) << r.output;
  const bool gone = wait_for([&] { return !process_running(grandchild); }, 30);
  if (!gone) ::kill(grandchild, SIGKILL);
  EXPECT_TRUE(gone) << "pid " << grandchild << " outlived the SIGKILLed launcher\n" << r.output;
}

TEST(LaunchReport, AFailedRankIsRecordedInTheRunDirectory) {
  const std::string dir = scratch_dir("report_exit3");
  const std::string marker = unique_marker("report");
  auto r = run_process(launch({"--nproc-per-node", "2", "--grace-period", "2", "--run-dir", dir},
                              {"sh", "-c", "if [ $RANK = 1 ]; then echo last words " + marker + "; exit 3; fi; exec " +
                                               kSleeper + " 30 " + marker}),
                       30);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "why the job ended: " + dir + "/launch-node0.log")) << r.output;
  const std::string log = read_text(dir + "/launch-node0.log");
  EXPECT_TRUE(contains(log, "rank 1 failed: exit code 3\n  last lines of rank 1:\n  | last words " + marker)) << log;
  EXPECT_TRUE(contains(log, "giving up after 0 restarts (--max-restarts 0): rank 1 failed: exit code 3")) << log;
  const auto verdict = read_json(dir + "/launch-node0.json");
  EXPECT_EQ(verdict.value("outcome", ""), "failed") << read_text(dir + "/launch-node0.json");
  EXPECT_EQ(verdict.value("exit_code", -1), 1);
  EXPECT_EQ(verdict.value("round", -1), 0);
  EXPECT_FALSE(verdict.value("time", "").empty());
  const auto failure = verdict.value("failure", nlohmann::json::object());
  EXPECT_EQ(failure.value("rank", -1), 1) << verdict.dump(2);
  EXPECT_EQ(failure.value("how", ""), "exit code 3") << verdict.dump(2);
  EXPECT_EQ(failure.value("last_lines", nlohmann::json::array()), nlohmann::json::array({"last words " + marker}))
      << verdict.dump(2);
}

TEST(LaunchReport, ARestartThatSucceedsKeepsTheHistoryAndReplacesAnEarlierVerdict) {
  const std::string dir = scratch_dir("report_restart");
  std::ofstream(dir + "/launch-node0.log") << "an earlier job's entry\n";
  std::ofstream(dir + "/launch-node0.json") << R"({"outcome": "failed"})";
  auto r = run_process(launch({"--nproc-per-node", "2", "--max-restarts", "1", "--run-dir", dir},
                              {"sh", "-c", "if [ $RANK = 1 ] && [ $DTRAIN_RESTART_COUNT = 0 ]; then exit 3; fi"}),
                       30);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string log = read_text(dir + "/launch-node0.log");
  EXPECT_EQ(log.rfind("an earlier job's entry\n", 0), 0u) << log;
  const auto failed = log.find("rank 1 failed: exit code 3");
  const auto restarted = log.find("restarting the job (restart 1 of 1)");
  EXPECT_NE(failed, std::string::npos) << log;
  EXPECT_NE(restarted, std::string::npos) << log;
  EXPECT_LT(failed, restarted) << log;
  const std::string last = "the job succeeded after 1 restart\n";
  EXPECT_TRUE(log.size() > last.size() && log.substr(log.size() - last.size()) == last) << log;
  const auto verdict = read_json(dir + "/launch-node0.json");
  EXPECT_EQ(verdict.value("outcome", ""), "succeeded") << verdict.dump(2);
  EXPECT_EQ(verdict.value("exit_code", -1), 0);
  EXPECT_EQ(verdict.value("round", -1), 1);
  EXPECT_FALSE(verdict.contains("failure")) << verdict.dump(2);
}

// Without --run-dir, node 0's agent asks its store for the directory a real trainer's rank 0
// published there, and starts the report while the job runs; the signal that stopped it is the verdict.
TEST(LaunchReport, WithoutTheFlagTheTrainersRunDirectoryHoldsTheReport) {
  const std::string dir = scratch_dir("report_trainer") + "/run";
  auto job = std::async(std::launch::async, [&] {
    return run_process(launch({"--nproc-per-node", "2"}, {kBin, "train", "--set", "model.preset=tiny", "--set",
                                                           "train.steps=1000000", "--set", "train.run_dir=" + dir}),
                       120, {"OMP_NUM_THREADS=1"});
  });
  // config.json is written after the run directory is published.
  const bool started = wait_for([&] { return fs::exists(dir + "/config.json"); }, 90);
  const int agent = started ? launcher_pid("train.run_dir=" + dir) : 0;
  ASSERT_GT(agent, 0) << job.get().output;
  EXPECT_TRUE(wait_for([&] { return read_json(dir + "/launch-node0.json").value("outcome", "") == "running"; }, 30))
      << read_text(dir + "/launch-node0.json");
  // The log is written before the verdict that says "running".
  EXPECT_TRUE(contains(read_text(dir + "/launch-node0.log"), "node 0 of 1, 2 workers"))
      << "log: " << read_text(dir + "/launch-node0.log");
  ::kill(agent, SIGTERM);
  const auto r = job.get();
  EXPECT_EQ(r.exit_code, 143) << r.output;
  EXPECT_TRUE(contains(read_text(dir + "/launch-node0.log"), "stopped by signal 15; workers terminated")) << r.output;
  const auto verdict = read_json(dir + "/launch-node0.json");
  EXPECT_EQ(verdict.value("outcome", ""), "stopped") << r.output;
  EXPECT_EQ(verdict.value("exit_code", -1), 143);
}

TEST(LaunchReport, AReportThatCannotBeWrittenLeavesTheExitCodeAlone) {
  const std::string dir = scratch_dir("report_unwritable");
  fs::create_directory(dir + "/launch-node0.json");  // no file can be renamed over a directory
  auto r = run_process(launch({"--run-dir", dir}, {"true"}), 30);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: cannot write the launch report")) << r.output;
  EXPECT_TRUE(contains(read_text(dir + "/launch-node0.log"), "the job succeeded")) << r.output;
}

TEST(LaunchReport, ARunDirectoryThatDoesNotExistIsNotCreated) {
  const std::string dir = scratch_dir("report_missing") + "/run";
  auto r = run_process(launch({"--run-dir", dir}, {"sh", "-c", "exit 3"}), 30);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no launch report: the run directory " + dir + " does not exist")) << r.output;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(LaunchBadInput, UnknownFlag) {
  auto r = run_process({kBin, "launch", "--nproc-per-nod", "2", "--", "true"}, 10);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "--nproc-per-nod")) << r.output;
}

TEST(LaunchBadInput, NodeRankOutsideNnodes) {
  auto r = run_process(launch({"--nnodes", "2", "--node-rank", "2"}, {"true"}), 10);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "--node-rank 2 must be smaller than --nnodes 2")) << r.output;
}

TEST(LaunchBadInput, MissingProgram) {
  auto r = run_process({kBin, "launch", "--nproc-per-node", "2"}, 10);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "no worker program")) << r.output;
}

TEST(LaunchBadInput, ProgramThatCannotRun) {
  auto r = run_process(launch({"--nproc-per-node", "1"}, {"/nonexistent/program"}), 10);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "cannot execute /nonexistent/program")) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 failed: exit code 127")) << r.output;
}

}  // namespace
}  // namespace dtrain::test

// Where and how the launcher writes its report: never into a run directory another run holds,
// appending to its log, and leaving no temporary file on a full disk.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include "launch/launch_test_cli.h"
#include "support/process.h"
#include "support/scratch.h"
#include "support/small_tmpfs.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

std::set<std::string> file_names(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A tiny training run in `dir` that goes on until it is stopped.
std::vector<std::string> endless_run(const std::string& dir) {
  return {kBin,    "run",   "--nproc-per-node", "1", "--no-sample", "--set", "model.preset=tiny", "--set", "train.steps=1000000",
          "--set", "train.eval_every=0", "--set", "train.run_dir=" + dir};
}

// The repro: a second `dtrain run` in the directory of a running one was refused by the directory
// lock, yet its launcher set the verdict to "failed" and added its lines to the log while the first
// trained; the first then rewrote the log at its end, dropping what others had added since it read it.
TEST(LaunchReport, ARunRefusedBecauseItsDirectoryIsInUseWritesNothingThereAndTheHolderAppends) {
  const std::string dir = scratch_dir("report_in_use") + "/run";
  auto first = std::async(std::launch::async, [&] { return run_process(endless_run(dir), 120, {"OMP_NUM_THREADS=1"}); });
  // The first run's trainer holds the directory (a world of one too) and its launcher reports there.
  const bool running =
      wait_for([&] { return read_json(dir + "/launch-node0.json").value("outcome", "") == "running"; }, 90);
  const int first_launcher = running ? launcher_pid("train.run_dir=" + dir, "run") : 0;
  ASSERT_GT(first_launcher, 0) << first.get().output;
  const std::string log_before = read_text(dir + "/launch-node0.log");
  const auto files_before = file_names(dir);

  const ProcessResult second = run_process(endless_run(dir), 90, {"OMP_NUM_THREADS=1"});
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_TRUE(contains(second.output, "run directory '" + dir + "' is in use by pid ")) << second.output;
  EXPECT_TRUE(contains(second.output, "no launch report: the run directory " + dir + " is in use by pid ")) << second.output;
  EXPECT_EQ(read_json(dir + "/launch-node0.json").value("outcome", ""), "running") << read_text(dir + "/launch-node0.json");
  EXPECT_EQ(read_text(dir + "/launch-node0.log"), log_before);
  EXPECT_EQ(file_names(dir), files_before);

  // What reaches the log while the first run goes on stays there when it ends.
  std::ofstream(dir + "/launch-node0.log", std::ios::app) << "a line added while the job ran\n";
  ::kill(first_launcher, SIGTERM);
  const ProcessResult ended = first.get();
  EXPECT_EQ(ended.exit_code, 143) << ended.output;
  const std::string log = read_text(dir + "/launch-node0.log");
  EXPECT_EQ(log.rfind(log_before + "a line added while the job ran\n", 0), 0u) << log;
  EXPECT_TRUE(contains(log, "stopped by signal 15; workers terminated")) << log;
  EXPECT_EQ(read_json(dir + "/launch-node0.json").value("outcome", ""), "stopped");
}

// The repro: a `dtrain run` that the trainer's start rules refused (here: another run's files in its
// run directory, which has no lock holder any more) replaced that run's verdict with "failed" and added
// its lines to that run's log. The report waits for the trainer to take the directory.
TEST(LaunchReport, ARunRefusedByTheStartRulesLeavesTheEarlierRunsReportAlone) {
  const std::string dir = scratch_dir("report_refused_start") + "/run";
  const std::vector<std::string> tiny = {kBin, "run", "--nproc-per-node", "1", "--no-sample", "--set", "model.preset=tiny",
                                         "--set", "train.steps=2", "--set", "train.eval_every=0", "--set", "train.run_dir=" + dir};
  const ProcessResult first = run_process(tiny, 120, {"OMP_NUM_THREADS=1"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string log_before = read_text(dir + "/launch-node0.log");
  const std::string verdict_before = read_text(dir + "/launch-node0.json");

  std::vector<std::string> fresh = tiny;
  fresh.insert(fresh.end(), {"--set", "train.resume=never"});
  const ProcessResult refused = run_process(fresh, 120, {"OMP_NUM_THREADS=1"});
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_TRUE(contains(refused.output, "already holds another run's files")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "no launch report: this job's trainer did not take the run directory")) << refused.output;
  EXPECT_EQ(read_text(dir + "/launch-node0.json"), verdict_before);
  EXPECT_EQ(read_text(dir + "/launch-node0.log"), log_before);
}

// The repro: on a full disk each failed write of the report left its empty temporary file.
TEST(LaunchReport, AFullRunDirectoryIsWarnedAboutAndGetsNoTemporaryFile) {
  SmallTmpfs disk("report_full_disk", 16 << 10);
  if (!disk.unavailable().empty()) GTEST_SKIP() << disk.unavailable();
  disk.fill();
  auto r = run_process(launch({"--run-dir", disk.dir(), "--max-restarts", "1"}, {"sh", "-c", "exit 3"}), 30);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: cannot write the launch report")) << r.output;
  for (const auto& name : file_names(disk.dir())) EXPECT_NE(fs::path(name).extension(), ".tmp") << name;
}

}  // namespace
}  // namespace dtrain::test

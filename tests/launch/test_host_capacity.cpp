// What one host can run, checked before the launcher starts a process: ranks per core, threads per
// rank, and the memory a training run's ranks need.
#include <gtest/gtest.h>

#include <filesystem>

#include "launch/host_capacity.h"
#include "launch/launch_test_cli.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

constexpr double kGiB = double(1 << 30);
const HostResources kSmallHost{2, int64_t(24 * kGiB)};  // the host of the report: 2 cores, 24 GiB

RanksOnHost ranks(int n, int threads = 1, double bytes = 0) {
  RanksOnHost job;
  job.ranks = n;
  job.threads_per_rank = threads;
  job.bytes_per_rank = bytes;
  job.bytes_per_rank_how = "an estimate";
  return job;
}

TEST(HostCapacity, WhatFitsPassesSilently) {
  const CapacityVerdict v = check_host_capacity(ranks(2, 1, 1 * kGiB), kSmallHost);
  EXPECT_EQ(v.error, "");
  EXPECT_EQ(v.warning, "");
}

TEST(HostCapacity, MoreRanksThanEightPerCoreAreRefusedWithTheMostThatFit) {
  EXPECT_EQ(check_host_capacity(ranks(16), kSmallHost).error, "");
  const CapacityVerdict v = check_host_capacity(ranks(4096), kSmallHost);
  EXPECT_EQ(v.error,
            "--nproc-per-node 4096 is more ranks than this host can run: it has 2 usable cores (its CPU affinity) and "
            "dtrain starts at most 8 ranks per core; use --nproc-per-node 16 or fewer here, and more nodes (--nnodes) "
            "for a larger world");
  EXPECT_EQ(v.warning, "");  // refused: no warning on top
}

TEST(HostCapacity, MoreThreadsPerRankThanCoresAreRefusedNamingTheSetting) {
  RanksOnHost job = ranks(1, 4096);
  job.threads_from = "train.threads";
  EXPECT_EQ(check_host_capacity(job, kSmallHost).error,
            "train.threads=4096 is more threads per rank than the 2 usable cores of this host, where the threads "
            "beyond them only wait for each other; use train.threads=2 or fewer");
}

TEST(HostCapacity, RanksThatNeedMoreMemoryThanIsAvailableAreRefusedWithTheNumbers) {
  const CapacityVerdict v = check_host_capacity(ranks(16, 1, 2 * kGiB), kSmallHost);
  EXPECT_EQ(v.error,
            "16 ranks need at least 32 GiB of memory (2 GiB each: an estimate), but this host has 24 GiB available "
            "(MemAvailable); use --nproc-per-node 12 or fewer here, more nodes (--nnodes), or a smaller model");
  EXPECT_TRUE(contains(check_host_capacity(ranks(1, 1, 100 * kGiB), kSmallHost).error, "1 rank needs at least 100 GiB"));
  EXPECT_TRUE(contains(check_host_capacity(ranks(1, 1, 100 * kGiB), kSmallHost).error, "not even one rank fits"));
  const HostResources unknown_memory{2, -1};
  EXPECT_EQ(check_host_capacity(ranks(2, 1, 100 * kGiB), unknown_memory).error, "");
}

// The floor fits and the estimate does not: a warning with the numbers, never a refusal (the
// estimate is close, not a bound); an estimate that fits says nothing.
TEST(HostCapacity, RanksWhoseEstimatedPeaksExceedTheMemoryAreWarnedAbout) {
  RanksOnHost job = ranks(2, 1, 1 * kGiB);
  job.estimated_peak_per_rank = 16 * kGiB;
  const CapacityVerdict v = check_host_capacity(job, kSmallHost);
  EXPECT_EQ(v.error, "");
  EXPECT_EQ(v.warning,
            "the memory estimate puts each rank's peak at 16 GiB (`dtrain estimate` shows every term): 2 ranks need about 32 GiB, "
            "more than the 24 GiB this host has available (MemAvailable), so the run may be killed for memory; --nproc-per-node 1 or "
            "fewer fits");
  job.estimated_peak_per_rank = 8 * kGiB;
  EXPECT_EQ(check_host_capacity(job, kSmallHost).warning, "");
  job.ranks = 4, job.estimated_peak_per_rank = 16 * kGiB;  // and the threads' warning on its own line
  EXPECT_TRUE(contains(check_host_capacity(job, kSmallHost).warning, "on 2 usable cores: they take turns on the cores and every step waits "
                                                                    "for the slowest rank\nthe memory estimate puts each rank's peak"));
}

TEST(HostCapacity, EveryReasonIsNamed) {
  const CapacityVerdict v = check_host_capacity(ranks(4096, 1, 64 << 20), kSmallHost);
  EXPECT_TRUE(contains(v.error, "--nproc-per-node 4096 is more ranks")) << v.error;
  EXPECT_TRUE(contains(v.error, "\n4096 ranks need at least 256 GiB of memory")) << v.error;
}

TEST(HostCapacity, MoreThreadsInAllThanCoresIsAWarning) {
  const CapacityVerdict v = check_host_capacity(ranks(4, 1), kSmallHost);
  EXPECT_EQ(v.error, "");
  EXPECT_EQ(v.warning, "4 ranks × 1 thread = 4 threads on 2 usable cores: they take turns on the cores and every "
                       "step waits for the slowest rank");
}

TEST(HostCapacity, ThisHostHasCoresAndMemory) {
  const HostResources host = HostResources::of_this_host();
  EXPECT_GE(host.cores, 1);
  EXPECT_GT(host.available_bytes, 0);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

const int kCores = HostResources::of_this_host().cores;

// The repro: --nproc-per-node 4096 on a 2-core host started trainers until the agent was killed.
// Here the program only marks that it started, so that the repro is harmless where nothing refuses it.
TEST(HostCapacity, TooManyRanksForTheCoresAreRefusedBeforeAnyStarts) {
  const std::string started = scratch_dir("too_many_ranks");
  const int n = kMaxRanksPerCore * kCores + 1;
  auto r = run_process(launch({"--nproc-per-node", std::to_string(n)}, {"sh", "-c", "touch " + started + "/$RANK"}), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain launch: error: this host cannot run the job as asked:\n  --nproc-per-node " +
                                     std::to_string(n) + " is more ranks than this host can run: it has " +
                                     std::to_string(kCores)))
      << r.output;
  EXPECT_TRUE(fs::is_empty(started)) << "workers started";
}

std::vector<std::string> tiny_run(const std::string& run_dir, std::vector<std::string> sets) {
  std::vector<std::string> argv{kBin,    "run", "--nproc-per-node", "1", "--no-sample", "--set", "model.preset=tiny",
                                "--set", "train.steps=3", "--set", "train.run_dir=" + run_dir};
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  return argv;
}

// The repro: train.threads=4096 on 2 cores; a 3-step tiny run did not end in 120 s.
TEST(HostCapacity, MoreThreadsThanCoresAreRefusedBeforeTheRunStarts) {
  const std::string run_dir = scratch_dir("too_many_threads") + "/run";
  const std::string threads = std::to_string(kCores + 1);
  auto r = run_process(tiny_run(run_dir, {"train.threads=" + threads}), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain run: error: this host cannot run the job as asked:\n  train.threads=" + threads +
                                     " is more threads per rank than the " + std::to_string(kCores) + " usable core"))
      << r.output;
  EXPECT_FALSE(fs::exists(run_dir));
  // A rank started without `dtrain run` checks its own threads before it joins anyone.
  auto alone = run_process({kBin, "train", "--set", "model.preset=tiny", "--set", "train.steps=3", "--set",
                            "train.run_dir=" + run_dir, "--set", "train.threads=" + threads},
                           60);
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_TRUE(contains(alone.output, "dtrain train: error: train.threads=" + threads + " is more threads per rank"))
      << alone.output;
  EXPECT_FALSE(fs::exists(run_dir));
  // And `config check` refuses what run refuses.
  auto checked = run_process({kBin, "config", "check", "--set", "train.threads=" + threads}, 60);
  EXPECT_EQ(checked.exit_code, 2) << checked.output;
  EXPECT_TRUE(contains(checked.output, "dtrain config: error: train.threads=" + threads + " is more threads per rank")) << checked.output;
}

// `argv` under an address-space limit of 8 GB, which keeps a run whose memory check fails to stop it
// from filling the machine: there its first large allocation fails at once.
ProcessResult run_within_8gb_of_address_space(const std::vector<std::string>& argv, double timeout_s) {
  std::string command = "ulimit -v 8000000 && exec";
  for (const auto& arg : argv) command += " '" + arg + "'";
  return run_process({"sh", "-c", command}, timeout_s);
}

// A model whose ranks need more memory than the host has is refused before any rank starts.
TEST(HostCapacity, AModelTooLargeForTheMemoryIsRefusedBeforeAnyRankStarts) {
  const std::string run_dir = scratch_dir("too_large_model") + "/run";
  auto r = run_within_8gb_of_address_space(tiny_run(run_dir, {"model.d_model=65536", "model.n_head=1"}), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain run: error: this host cannot run the job as asked:\n  1 rank needs at least ")) << r.output;
  EXPECT_TRUE(contains(r.output, "parameters × 16 bytes for weights, gradients and optimizer state")) << r.output;
  EXPECT_TRUE(contains(r.output, "available (MemAvailable)")) << r.output;
  EXPECT_FALSE(fs::exists(run_dir));
}

// `dtrain run` gives the launcher its estimate: a tiny model whose micro-batch of 4096 sequences of
// 2048 tokens needs tens of GiB of activations is warned about before any rank starts (the state's
// floor fits). The rank then stops on its own (the built-in corpus holds too few sequences for such a
// batch).
TEST(HostCapacity, ARunWhoseEstimateExceedsTheMemoryIsWarnedAboutBeforeAnyRankStarts) {
  const std::string run_dir = scratch_dir("estimate_too_large") + "/run";
  auto r = run_within_8gb_of_address_space(
      tiny_run(run_dir, {"model.seq_len=2048", "train_micro_batch_size_per_gpu=4096", "train_batch_size=auto"}), 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain run: warning: the memory estimate puts each rank's peak at ")) << r.output;
  EXPECT_TRUE(contains(r.output, "so the run may be killed for memory")) << r.output;
}

// The repro's milder form: more ranks than cores ran without a word.
TEST(HostCapacity, RanksTimesThreadsBeyondTheCoresAreWarnedAboutOnce) {
  const int n = kCores + 1;
  auto r = run_process(launch({"--nproc-per-node", std::to_string(n)}, {"true"}), 60, {"OMP_NUM_THREADS="});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "warning: "), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dtrain launch: warning: " + std::to_string(n) + " ranks × 1 thread = " +
                                     std::to_string(n) + " threads on " + std::to_string(kCores) + " usable core"))
      << r.output;
}

}  // namespace
}  // namespace dtrain::test

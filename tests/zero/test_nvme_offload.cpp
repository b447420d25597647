// NVMe offload of the optimizer state (and at stage 3 of the parameter shard): streaming the state
// through sub-group buffers updates exactly as keeping it in memory, with io_uring and without; a run
// offloads and resumes with the same losses as one that does not; a path that cannot hold the state
// is a named error before anything is written. (The files are unnamed from the start, so nvme_path
// never shows them, whether a run ends or is killed.)
#include <gtest/gtest.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "optim/flat_optimizer.h"
#include "parallel/zero/async_file_io.h"
#include "parallel/zero/nvme_optimizer.h"
#include "common/unnamed_file.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/equivalence.h"
#include "train/train_config.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// One, two, three and many sub-groups (the last one short), under io_uring and pread/pwrite: the
// parameters and the state after three steps equal those of the in-memory optimizer bit for bit.
TEST(NvmeOptimizer, StreamsTheStateThroughSubGroupsExactlyLikeMemory) {
  const int64_t n = 10007, a = 3001;
  const Spans decay = {{0, 500}, {700, 4000}, {9000, 1007}};
  for (const char* uring : {"1", "0"})
    for (const nlohmann::json spec : {nlohmann::json{{"type", "AdamW"}}, nlohmann::json{{"type", "SGD"}, {"params", {{"momentum", 0.9}}}}})
      for (int64_t sub_group : {int64_t(20000), int64_t(6000), int64_t(3500), int64_t(1000)}) {
        ::setenv("DTRAIN_IO_URING", uring, 1);
        torch::manual_seed(5);
        at::Tensor expected = torch::randn({n}), got = expected.clone();
        auto memory = make_flat_optimizer(spec, expected);
        NvmeOptimizer nvme(make_elementwise_rule(spec), n, expected.options(), {scratch_dir("nvme_unit"), sub_group});
        // With io_uring asked for, a kernel that refuses it gives the synchronous path, saying why.
        if (uring == std::string("0")) EXPECT_EQ(nvme.io_mode(), "synchronous pread/pwrite (DTRAIN_IO_URING=0)");
        else EXPECT_TRUE(nvme.io_mode() == "io_uring" || contains(nvme.io_mode(), "io_uring unavailable")) << nvme.io_mode();
        for (int step = 0; step < 3; ++step) {
          // Each its own copy: SGD scales the gradients it is given in place.
          const at::Tensor g = torch::randn({n}), g2 = g.clone();
          // Two pieces whose state lies in the other order, as a ZeRO rank's pieces may, with the
          // gradients scaled (clipped) on the way.
          memory->step_pieces({{expected.narrow(0, 0, a), g.narrow(0, 0, a), spans_within(decay, 0, a), n - a},
                               {expected.narrow(0, a, n - a), g.narrow(0, a, n - a), spans_within(decay, a, n - a), 0}},
                              0.01, {0.7});
          nvme.step_pieces({{got.narrow(0, 0, a), g2.narrow(0, 0, a), spans_within(decay, 0, a), n - a},
                            {got.narrow(0, a, n - a), g2.narrow(0, a, n - a), spans_within(decay, a, n - a), 0}},
                           0.01, {0.7});
        }
        const std::string what = spec.dump() + " sub-group " + std::to_string(sub_group) + " io_uring " + uring;
        EXPECT_TRUE(torch::equal(expected, got)) << what;
        for (const auto& [name, t] : memory->state()) EXPECT_TRUE(torch::equal(t, nvme.state().at(name))) << what << " " << name;
        // Restored state goes back to the files.
        NvmeOptimizer restored(make_elementwise_rule(spec), n, expected.options(), {scratch_dir("nvme_unit_restored"), sub_group});
        restored.load_state(memory->state());
        for (const auto& [name, t] : memory->state()) EXPECT_TRUE(torch::equal(t, restored.state().at(name))) << what << " " << name;
        // A resume fills state()'s own mappings in place and loads them: the files keep what was written.
        auto own = restored.state();
        for (auto& [name, t] : own)
          if (t.dim() > 0) t.fill_(0.5);
        restored.load_state(own);
        own.clear();
        for (const auto& [name, t] : restored.state())
          if (t.dim() > 0) EXPECT_TRUE(torch::equal(t, at::full({n}, 0.5f))) << what << " " << name;
        // At most three buffer sets, one per sub-group, of each state tensor (AdamW's fused path keeps no scratch).
        const int64_t groups = (n + sub_group - 1) / sub_group, buffer = std::min(sub_group, n);
        EXPECT_EQ(nvme.resident_bytes(), std::min<int64_t>(groups, 3) * int64_t(spec["type"] == "AdamW" ? 2 : 1) * buffer * 4) << what;
      }
  ::unsetenv("DTRAIN_IO_URING");
}

// ZeRO-3 with both offloads: the parameters are streamed from their file through the buffers with
// the state, never read or written through the pieces' own tensors, and end up in the file exactly
// as the in-memory optimizer leaves them.
TEST(NvmeOptimizer, StreamsTheParametersFromTheirFileWithTheState) {
  const int64_t n = 10007;
  const Spans decay = {{0, 500}, {700, 4000}, {9000, 1007}};
  const nlohmann::json spec = {{"type", "AdamW"}};
  for (int64_t sub_group : {int64_t(20000), int64_t(3500), int64_t(1000)}) {
    torch::manual_seed(5);
    at::Tensor expected = torch::randn({n});
    const std::string dir = scratch_dir("nvme_params");
    const int fd = make_unnamed_file(dir, n * 4);
    ASSERT_EQ(::pwrite(fd, expected.data_ptr(), size_t(n * 4), 0), n * 4);
    auto memory = make_flat_optimizer(spec, expected);
    NvmeOptimizer nvme(make_elementwise_rule(spec), n, expected.options(), {dir, sub_group});
    nvme.stream_parameters_from(fd, "the parameters' file");
    at::Tensor untouched = at::full({n}, 7.0f);  // stands for the file's mapping, which the step must not use
    for (int step = 0; step < 3; ++step) {
      const at::Tensor g = torch::randn({n});
      memory->step_pieces({{expected, g, decay, 0}}, 0.01, {});
      nvme.step_pieces({{untouched, g, decay, 0}}, 0.01, {});
    }
    at::Tensor in_file = at::empty({n});
    ASSERT_EQ(::pread(fd, in_file.data_ptr(), size_t(n * 4), 0), n * 4);
    ::close(fd);
    EXPECT_TRUE(torch::equal(expected, in_file)) << "sub-group " << sub_group;
    EXPECT_TRUE(torch::equal(untouched, at::full({n}, 7.0f))) << "sub-group " << sub_group;
    for (const auto& [name, t] : memory->state()) EXPECT_TRUE(torch::equal(t, nvme.state().at(name))) << name;
    // A third buffer per set, for the parameters.
    const int64_t groups = (n + sub_group - 1) / sub_group, buffer = std::min(sub_group, n);
    EXPECT_EQ(nvme.resident_bytes(), std::min<int64_t>(groups, 3) * 3 * buffer * 4) << "sub-group " << sub_group;
  }
}

// A read that meets the end of its file fails naming the file and the offset, under io_uring and
// under pread alike, instead of leaving the rest of the buffer unread.
TEST(AsyncFileIo, AReadPastTheEndOfTheFileIsANamedError) {
  for (const char* uring : {"1", "0"}) {
    ::setenv("DTRAIN_IO_URING", uring, 1);
    AsyncFileIo io;
    const int fd = make_unnamed_file(scratch_dir("io_eof"), 4096);
    std::vector<char> buffer(8192);
    std::string error;
    try {
      io.wait(io.read(fd, "the test file", buffer.data(), buffer.size(), 0));
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    ::close(fd);
    EXPECT_EQ(error, "cannot read 8192 bytes at offset 0 of 'the test file': Input/output error") << "io_uring " << uring;
  }
  ::unsetenv("DTRAIN_IO_URING");
}

std::string refusal(const std::string& path) {
  try {
    NvmeOptimizer(make_elementwise_rule({{"type", "AdamW"}}), 100, at::TensorOptions(), {path, 10});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(NvmeOptimizer, APathThatCannotHoldTheStateIsRefusedByName) {
  const std::string dir = scratch_dir("nvme_refused");
  EXPECT_EQ(refusal(dir + "/missing"), "'" + dir + "/missing' does not exist");
  { std::ofstream(dir + "/file") << "x"; }
  EXPECT_EQ(refusal(dir + "/file"), "'" + dir + "/file' is not a directory");
  // A directory this process cannot write: a read-only one, or for root (whom permissions do not
  // stop) a directory of /proc.
  std::string read_only = "/proc/self";
  if (::geteuid() != 0) {
    read_only = dir + "/read_only";
    fs::create_directory(read_only);
    fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
  }
  EXPECT_EQ(refusal(read_only).rfind("'" + read_only + "' is not writable: ", 0), 0u) << refusal(read_only);
}

// zero_optimization.sub_group_size left unset: sub-groups of 1/48 of the state, so that the three
// buffer sets a step keeps hold 1/16 of what it streams; never under kMinAutoSubGroup elements, never
// over the state. A size the config gives is kept.
TEST(NvmeOptimizer, AnUnsetSubGroupSizeKeepsTheBuffersASixteenthOfTheState) {
  EXPECT_EQ(sub_group_size_for(480'000'000), 10'000'000);
  EXPECT_EQ(sub_group_size_for(100'000'001), 2'083'334);  // rounded up: 48 sub-groups, the last one short
  for (int64_t numel : {int64_t(480'000'000), int64_t(100'000'001), int64_t(1) << 30}) {
    const int64_t sub_group = sub_group_size_for(numel);
    EXPECT_LE(3 * sub_group, numel / 16 + 3) << numel;
  }
  EXPECT_EQ(sub_group_size_for(10'000'000), kMinAutoSubGroup);
  EXPECT_EQ(sub_group_size_for(4000), 4000);
  EXPECT_FALSE(load_train_config("", {"model.preset=tiny"}, 1).sub_group_size.has_value());
  EXPECT_EQ(load_train_config("", {"model.preset=tiny", "zero_optimization.sub_group_size=4000"}, 1).sub_group_size, 4000);
}

std::vector<std::string> job(int stage) {
  return {"zero_optimization.stage=" + std::to_string(stage), "train.steps=6", "zero_optimization.reduce_bucket_size=5000",
          "train.freeze=[\"blocks.0.ln1.*\"]"};
}

// At stage 3 the parameter shard goes to NVMe too.
std::vector<std::string> offload_job(int stage, const std::string& nvme_path) {
  auto sets = job(stage);
  const std::string on_nvme = "{\"device\":\"nvme\",\"nvme_path\":\"" + nvme_path + "\"}";
  sets.insert(sets.end(), {"zero_optimization.offload_optimizer=" + on_nvme, "zero_optimization.sub_group_size=4000"});
  if (stage == 3) sets.push_back("zero_optimization.offload_param=" + on_nvme);
  return sets;
}

// The arithmetic is the same wherever the state lives, so offloading changes nothing bit for bit:
// straight through, and stopped at step 3 and resumed (the checkpoint reads the state from the files
// and the resumed run writes it back).
TEST(NvmeOffload, TrainsAndResumesBitForBitLikeStateInMemory) {
  for (int stage : {2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const std::string nvme = scratch_dir("nvme_path");
    const TrainingRun memory = train(scratch_dir("nvme_memory"), 2, job(stage));
    ASSERT_EQ(memory.result.exit_code, 0) << memory.result.output;
    const TrainingRun offloaded = train(scratch_dir("nvme_offloaded"), 2, offload_job(stage, nvme));
    ASSERT_EQ(offloaded.result.exit_code, 0) << offloaded.result.output;
    EXPECT_TRUE(contains(offloaded.result.output, "offload_optimizer.device=nvme: optimizer state (")) << offloaded.result.output;
    EXPECT_TRUE(contains(offloaded.result.output, "sub-group(s) of 4000 elements")) << offloaded.result.output;
    if (stage == 3)
      EXPECT_TRUE(contains(offloaded.result.output, "offload_param.device=nvme: the parameter shard (")) << offloaded.result.output;
    const std::string stopped = scratch_dir("nvme_stopped");
    auto first = offload_job(stage, nvme);
    first.push_back("train.stop_at_step=3");
    ASSERT_EQ(train(stopped, 2, first).result.exit_code, 0);
    const TrainingRun resumed = train(stopped, 2, offload_job(stage, nvme));
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    for (const TrainingRun* run : {&offloaded, &resumed}) {
      ASSERT_EQ(run->steps.size(), 6u);
      for (int i = 0; i < 6; ++i)
        EXPECT_EQ(run->steps[i]["loss"].get<double>(), memory.steps[i]["loss"].get<double>()) << run->dir << " step " << i + 1;
      expect_same_parameters(final_parameters(memory, 6), final_parameters(*run, 6));
    }
  }
}

// The parameter shard on NVMe with the optimizer state in memory: gathers read the file, the step
// updates the shard through its mapping. In forward each part's piece is read while the part two
// before it computes, ahead of its gather (the trace of wall_clock_breakdown, read for order only).
// A run that leaves sub_group_size unset says how its sub-groups were sized, and is not warned that
// offloading saves nothing (the tiny model's state is one sub-group under the floor, by design).
TEST(NvmeOffload, AnUnsetSubGroupSizeIsSizedAndSaidSo) {
  const std::string on_nvme = "{\"device\":\"nvme\",\"nvme_path\":\"" + scratch_dir("nvme_auto_path") + "\"}";
  const TrainingRun run = train(scratch_dir("nvme_auto_sub_group"), 1,
                                {"zero_optimization.stage=1", "train.steps=1", "zero_optimization.offload_optimizer=" + on_nvme});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, " MiB of buffers (zero_optimization.sub_group_size unset: sub-groups sized for buffers of 1/16 "
                                          "of the streamed state, and of at least 1048576 elements); I/O by "))
      << run.result.output;
  EXPECT_FALSE(contains(run.result.output, "saves no memory")) << run.result.output;
}

TEST(NvmeOffload, TheParameterShardAloneOnNvmeTrainsBitForBitLikeMemory) {
  const TrainingRun memory = train(scratch_dir("nvme_param_memory"), 2, job(3));
  ASSERT_EQ(memory.result.exit_code, 0) << memory.result.output;
  auto sets = job(3);
  sets.push_back("zero_optimization.offload_param={\"device\":\"nvme\",\"nvme_path\":\"" + scratch_dir("nvme_param_path") + "\"}");
  sets.push_back("wall_clock_breakdown=true");
  const TrainingRun offloaded = train(scratch_dir("nvme_param_offloaded"), 2, sets);
  ASSERT_EQ(offloaded.result.exit_code, 0) << offloaded.result.output;
  EXPECT_TRUE(contains(offloaded.result.output, "mapped for the optimizer step")) << offloaded.result.output;
  ASSERT_EQ(offloaded.steps.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(offloaded.steps[i]["loss"].get<double>(), memory.steps[i]["loss"].get<double>()) << "step " << i + 1;
  expect_same_parameters(final_parameters(memory, 6), final_parameters(offloaded, 6));
  std::vector<std::pair<std::string, int>> events;
  for (const auto& e : offloaded.steps[1]["unit_trace"]) events.emplace_back(e[0].get<std::string>(), e[1].get<int>());
  auto first = [&](const std::string& what, int part) {
    return size_t(std::find(events.begin(), events.end(), std::make_pair(what, part)) - events.begin());
  };
  const int last_part = 3;  // the tiny model's two blocks are parts 1 and 2, the head part 3
  for (int part = 2; part <= last_part; ++part) {
    ASSERT_LT(first("read", part), events.size()) << "part " << part << " never read ahead";
    EXPECT_LT(first("read", part), first("end", part - 2)) << "part " << part;
    EXPECT_LT(first("read", part), first("gather", part)) << "part " << part;
  }
}

TEST(NvmeOffload, AMissingPathIsANamedErrorAndNothingIsWritten) {
  const std::string dir = scratch_dir("nvme_missing");
  for (const std::string what : {"param", "optimizer"}) {
    auto sets = offload_job(3, dir);
    sets.push_back("zero_optimization.offload_" + what + "={\"device\":\"nvme\",\"nvme_path\":\"" + dir + "/no-such-disk\"}");
    const TrainingRun run = train(dir, 2, sets);
    EXPECT_NE(run.result.exit_code, 0);
    EXPECT_TRUE(contains(run.result.output, "zero_optimization.offload_" + what + ".nvme_path: '" + dir + "/no-such-disk' does not exist"))
        << run.result.output;
    EXPECT_FALSE(fs::exists(dir + "/ckpt")) << run.result.output;
  }
}

}  // namespace
}  // namespace dtrain::test

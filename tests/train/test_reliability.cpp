// What a run must survive: divergence, a second run on its directory, damaged checkpoints, kills at
// any moment. Each test is a defect a hostile user found, made small.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/file_checksum.h"
#include "ckpt/safetensors.h"
#include "optim/flat_optimizer.h"
#include "support/process.h"
#include "support/scratch.h"
#include "support/small_tmpfs.h"
#include "train/train_config.h"
#include "train/training_state.h"
#include "equivalence.h"

using namespace dtrain;
using namespace dtrain::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Replaces the first `from` in the file with `to` of the same length, keeping the file's size.
void patch_same_size(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = read_text_file(path);
  const auto at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  bytes.replace(at, from.size(), to);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

uint64_t byte_offset(const json& index, const std::string& tensor) { return index["tensors"][tensor]["chunks"][0]["byte_range"][0].get<uint64_t>(); }

// Moves the bytes of `tensor`'s one chunk to start at `value` in the checkpoint's index.json, and
// reseals the index.
void set_byte_offset(const std::string& checkpoint, const std::string& tensor, uint64_t value) {
  json index = index_of(checkpoint);
  json& range = index["tensors"][tensor]["chunks"][0]["byte_range"];
  range = {value, value + range[1].get<uint64_t>() - range[0].get<uint64_t>()};
  write_file_atomically(checkpoint + "/index.json", index.dump(1));
  reseal(checkpoint, "index.json");
}

// Writes `value` over element 0 of `tensor`'s chunk in the one-rank checkpoint's shard and reseals the shard.
void poison(const std::string& checkpoint, const std::string& tensor, float value) {
  const std::string shard = "shard-00000.safetensors";
  for (const auto& e : read_safetensors_header(checkpoint + "/" + shard))
    if (e.name.rfind(tensor + "@", 0) == 0) {
      std::fstream f(checkpoint + "/" + shard, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(e.begin));
      f.write(reinterpret_cast<const char*>(&value), sizeof value);
      f.close();
      reseal(checkpoint, shard);
      return;
    }
  FAIL() << checkpoint << "/" << shard << " has no chunk of " << tensor;
}

// The line of `text` that holds `part` ("" when none).
std::string line_with(const std::string& text, const std::string& part) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (contains(line, part)) return line;
  return "";
}

const std::string kConstantLr = "scheduler={\"type\":\"constant\"}";
const std::string kBlowUp = "optimizer.params={\"lr\":1e6}";

}  // namespace

// A write to a dead peer's socket or to a closed pipe raises SIGPIPE; a trainer that died of it would
// end without a word (a pipeline neighbour writing to a killed stage over gloo did). Here the output
// pipe closes at once: the run trains to its end regardless.
TEST(Reliability, ATrainerWhoseOutputPipeClosesTrainsToTheEnd) {
  const std::string dir = scratch_dir("closed_output");
  std::string command = "set -o pipefail; " + std::string(DTRAIN_BIN) + " train --set train.run_dir=" + dir;
  for (const auto& s : kBase) command += " --set '" + s + "'";
  const auto r = run_process({"bash", "-c", command + " | true"}, 120, {"OMP_NUM_THREADS=1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(finished_run(r, dir).steps.size(), 4u);
}

// lr 1e6 blows the weights up at once; every later step is skipped. The run must stop (not exit 0
// after saving garbage), name the last good checkpoint, and `keep` must not have pruned it.
TEST(Divergence, StopsNamingTheLastGoodCheckpointWhichKeepKeeps) {
  const std::string dir = scratch_dir("diverge_stop");
  const std::vector<std::string> job = {kConstantLr, "checkpoint.every_steps=5", "checkpoint.keep=2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), job.begin(), job.end());
    return extra;
  };
  ASSERT_EQ(train(dir, 1, with({"train.steps=10"})).result.exit_code, 0);
  const TrainingRun blown = train(dir, 1, with({"train.steps=40", kBlowUp}));
  EXPECT_NE(blown.result.exit_code, 0) << blown.result.output;
  EXPECT_TRUE(contains(blown.result.output, "consecutive steps skipped or spiking")) << blown.result.output;
  EXPECT_TRUE(contains(blown.result.output, "the last good checkpoint is " + ckpt(dir, 10))) << blown.result.output;
  EXPECT_TRUE(contains(blown.result.output, "rank 0 failed: exit code 3")) << blown.result.output;
  EXPECT_TRUE(fs::exists(ckpt(dir, 20))) << "the run saved past the blow-up, so keep had a reason to prune";
  EXPECT_TRUE(fs::exists(ckpt(dir, 10) + "/manifest.json")) << "keep pruned the last healthy checkpoint";
  EXPECT_FALSE(fs::exists(ckpt(dir, 40))) << "the diverged run went on to the end";
  EXPECT_TRUE(contains(read_text_file(dir + "/rank-0.log"), "ERROR stopping: training diverged"));
  // Back at a sane learning rate, resume starts from the healthy checkpoint, not the newest one.
  const TrainingRun sane = train(dir, 1, with({"train.steps=15"}));
  EXPECT_EQ(sane.result.exit_code, 0) << sane.result.output;
  EXPECT_TRUE(contains(sane.result.output, "resumed from " + ckpt(dir, 10) + " at step 10")) << sane.result.output;
  EXPECT_TRUE(contains(sane.result.output, "was taken when training had gone wrong")) << sane.result.output;
}

TEST(Divergence, RollbackReloadsTheLastGoodCheckpointAtALowerLearningRate) {
  const std::string dir = scratch_dir("diverge_rollback");
  const std::vector<std::string> job = {kConstantLr, "checkpoint.every_steps=5"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), job.begin(), job.end());
    return extra;
  };
  ASSERT_EQ(train(dir, 1, with({"train.steps=10"})).result.exit_code, 0);
  // One rollback at 1e-9 x 1e6 = 1e-3 is enough to train on.
  const TrainingRun run = train(dir, 1, with({"train.steps=20", kBlowUp, "train.on_divergence=rollback", "train.rollback_lr_factor=1e-9",
                                              "train.divergence_steps=3"}));
  EXPECT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "rolled back to " + ckpt(dir, 10) + " (step 10)")) << run.result.output;
  ASSERT_EQ(run.steps.size(), 20u);  // the diverged steps were dropped from metrics.jsonl
  EXPECT_LT(run.steps.back()["loss"].get<double>(), 10.0);
  const auto state = json::parse(read_text_file(ckpt(dir, 20) + "/trainer_state.json"));
  EXPECT_DOUBLE_EQ(state["lr_scale"].get<double>(), 1e-9);
  EXPECT_EQ(state["rollbacks"].get<int>(), 1);
}

// A run that diverges before any checkpoint, with rollback on, tried no rollback: the stop used to say
// "no rollback left", as if rollbacks had been used up. It says what happened instead.
TEST(Divergence, AStopWithoutAnyRollbackTriedSaysThereWasNothingToRollBackTo) {
  const std::string dir = scratch_dir("diverge_no_rollback");
  const TrainingRun run = train(dir, 1, {kConstantLr, kBlowUp, "train.steps=20", "train.on_divergence=rollback", "train.divergence_steps=3",
                                         "checkpoint.every_steps=100"});
  EXPECT_NE(run.result.exit_code, 0) << run.result.output;
  // Which step the blown-up run first fails depends on where the kernels overflow; the message does not.
  EXPECT_TRUE(std::regex_search(run.result.output, std::regex("diverged at step \\d+; no healthy, undamaged checkpoint to roll back to\n")))
      << run.result.output;
  EXPECT_FALSE(contains(run.result.output, "no rollback left")) << run.result.output;
}

// A checkpoint whose weights went NaN with valid checksums (here a parameter at step 6, an Adam
// moment at step 4) was resumed: every step was skipped, and the run stopped with exit 3 advising to
// resume from that very checkpoint. Now both are damaged: resume passes over them to step 2, and the
// advice after the divergence that follows names step 2 alone. With none left, resume says so.
TEST(Divergence, ACheckpointHoldingNaNIsDamagedAndNeverAdvised) {
  const std::string dir = scratch_dir("nan_checkpoint");
  const std::vector<std::string> job = {kConstantLr, "checkpoint.every_steps=2", "checkpoint.keep=0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), job.begin(), job.end());
    return extra;
  };
  ASSERT_EQ(train(dir, 1, with({"train.steps=6"})).result.exit_code, 0);
  poison(ckpt(dir, 6), "model/blocks.0.q_proj.weight", NAN);
  poison(ckpt(dir, 4), "optimizer/exp_avg_sq/blocks.1.up_proj.weight", NAN);
  // No checkpoint is due before the blow-up stops the run, so none of the three is written over.
  const TrainingRun blown = train(dir, 1, with({"train.steps=40", "checkpoint.every_steps=0", kBlowUp}));
  const std::string& out = blown.result.output;
  EXPECT_TRUE(contains(out, ckpt(dir, 6) + "/shard-00000.safetensors': tensor 'model/blocks.0.q_proj.weight@[0:32,0:32]' holds a non-finite value")) << out;
  EXPECT_TRUE(contains(out, ckpt(dir, 4) + "/shard-00000.safetensors': tensor 'optimizer/exp_avg_sq/blocks.1.up_proj.weight@[0:128,0:32]' holds a non-finite value"))
      << out;
  EXPECT_TRUE(contains(out, "resumed from " + ckpt(dir, 2) + " at step 2")) << out;
  EXPECT_TRUE(contains(out, "rank 0 failed: exit code 3")) << out;
  const std::string stop = line_with(out, "stopping: training diverged");
  EXPECT_TRUE(contains(stop, "the last good checkpoint is " + ckpt(dir, 2) + " (step 2)")) << out;
  EXPECT_FALSE(contains(stop, ckpt(dir, 6)) || contains(stop, ckpt(dir, 4))) << stop;
  poison(ckpt(dir, 2), "model/wte.weight", INFINITY);
  const TrainingRun none = train(dir, 1, with({"train.steps=8"}));
  EXPECT_NE(none.result.exit_code, 0);
  EXPECT_TRUE(contains(none.result.output, "no checkpoint in " + dir + "/ckpt can be resumed (warnings above say why)")) << none.result.output;
}

// index.json says where each chunk's bytes lie in the shard files. Edited with the manifest rewritten
// to match — one chunk moved by an element (step 6), two same-shaped tensors' offsets swapped (step
// 4) — it loaded wrong weights without a word. Now such a checkpoint is damaged, named by tensor,
// and resume passes over it.
TEST(Resume, AnIndexWhoseOffsetsDisagreeWithItsShardIsDamaged) {
  const std::string dir = scratch_dir("index_offsets");
  const std::vector<std::string> job = {"checkpoint.every_steps=2", "checkpoint.keep=0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), job.begin(), job.end());
    return extra;
  };
  ASSERT_EQ(train(dir, 1, with({"train.steps=6"})).result.exit_code, 0);
  const std::string q = "model/blocks.0.q_proj.weight", ln1 = "model/blocks.0.ln1.weight", ln2 = "model/blocks.0.ln2.weight";
  set_byte_offset(ckpt(dir, 6), q, byte_offset(index_of(ckpt(dir, 6)), q) + 4);
  const json index = index_of(ckpt(dir, 4));
  set_byte_offset(ckpt(dir, 4), ln1, byte_offset(index, ln2));
  set_byte_offset(ckpt(dir, 4), ln2, byte_offset(index, ln1));
  for (int step : {4, 6}) ASSERT_NO_THROW(CheckpointManager::verify(ckpt(dir, step))) << "the manifest does not match the edited index";
  const TrainingRun resumed = train(dir, 1, with({"train.steps=8"}));
  const std::string& out = resumed.result.output;
  EXPECT_EQ(resumed.result.exit_code, 0) << out;
  EXPECT_TRUE(contains(out, ckpt(dir, 6) + "/index.json' disagrees with '" + ckpt(dir, 6) + "/shard-00000.safetensors' about tensor '" + q +
                                "' (its chunk from element 0): the index says byte offset"))
      << out;
  EXPECT_TRUE(contains(out, "about tensor '" + ln1 + "'")) << out;
  EXPECT_TRUE(contains(out, "resumed from " + ckpt(dir, 2) + " at step 2")) << out;
}

// A second run on a directory in use is refused at once, naming the holder, and touches nothing;
// once the holder is gone (killed: its lock file still names it) the next run takes over.
TEST(RunLock, ASecondRunOnTheSameDirectoryIsRefusedAndTheFirstIsUnharmed) {
  const std::string dir = scratch_dir("run_lock");
  auto train_argv = [&](int seed, int steps) {
    std::vector<std::string> argv = {DTRAIN_BIN, "train"};
    for (const auto& s : kBase) argv.insert(argv.end(), {"--set", s});
    for (const auto& s : {"train.run_dir=" + dir, "train.seed=" + std::to_string(seed), "train.steps=" + std::to_string(steps),
                          std::string("checkpoint.every_steps=1")})
      argv.insert(argv.end(), {"--set", s});
    return argv;
  };
  ProcessResult first;
  std::thread runner([&] { first = run_process(train_argv(7, 1000000), 120, {"OMP_NUM_THREADS=1"}); });
  std::vector<int> pids;
  std::string lock_text;
  const bool locked = wait_for([&] {
    pids = processes_with_markers({std::string("\0train\0", 7), "train.run_dir=" + dir, "train.seed=7"});
    std::ifstream lock(dir + "/.dtrain.lock");
    lock_text.assign(std::istreambuf_iterator<char>(lock), {});
    // `latest` appears with the first commit and stays; step 1 itself is pruned (checkpoint.keep 2)
    // as soon as step 3 is saved, which a slow poll can miss.
    return pids.size() == 1 && contains(lock_text, "pid " + std::to_string(pids[0]) + " on host") && fs::exists(dir + "/ckpt/latest");
  }, 60);
  if (!locked) {
    std::string found;
    for (int pid : pids) found += " " + std::to_string(pid);
    for (int pid : pids) ::kill(pid, SIGKILL);
    runner.join();
    FAIL() << "the first run never took its lock: processes found:" << (found.empty() ? " none" : found) << "; lock file: '"
           << lock_text << "'; a step committed: " << fs::exists(dir + "/ckpt/latest") << "\n" << first.output;
  }
  const std::string holder = "pid " + std::to_string(pids[0]);
  const ProcessResult second = run_process(train_argv(8, 5), 60, {"OMP_NUM_THREADS=1"});
  const bool first_alive = ::kill(pids[0], 0) == 0;
  ::kill(pids[0], SIGKILL);
  runner.join();
  EXPECT_NE(second.exit_code, 0) << second.output;
  EXPECT_TRUE(contains(second.output, "run directory '" + dir + "' is in use by " + holder + " on host")) << second.output;
  EXPECT_TRUE(first_alive) << "the first run ended before the second was refused:\n" << first.output;
  EXPECT_EQ(json::parse(read_text_file(dir + "/config.json"))["train"]["seed"], 7);
  EXPECT_FALSE(contains(read_text_file(dir + "/rank-0.log"), "train.seed=8"));
  // The killed holder's lock is taken over, and its checkpoints are intact.
  CheckpointOptions options;
  options.dir = dir + "/ckpt";
  const auto newest = CheckpointManager(options, 0, agree_alone()).find_resumable(nullptr, nullptr);
  ASSERT_TRUE(newest.has_value());
  const ProcessResult third = run_process(train_argv(7, int(newest->step) + 2), 60, {"OMP_NUM_THREADS=1"});
  EXPECT_EQ(third.exit_code, 0) << third.output;
  EXPECT_TRUE(contains(third.output, "took over the lock of " + dir + " from " + holder)) << third.output;
  EXPECT_TRUE(contains(third.output, "resumed from " + newest->dir)) << third.output;
}

TEST(RunLock, DefaultRunDirectoriesCarryMillisecondsAndThePid) {
  EXPECT_TRUE(std::regex_match(default_run_dir(), std::regex(R"(runs/\d{8}-\d{6}\.\d{3}-)" + std::to_string(getpid()))))
      << default_run_dir();
}

// Edits that keep a file's size once made resume crash-loop; now the checksum catches them and
// resume, and generate, fall back to the newest intact checkpoint.
TEST(Resume, SameSizeDamageFallsBackToTheNewestIntactCheckpoint) {
  const std::string dir = scratch_dir("same_size");
  const std::vector<std::string> job = {"checkpoint.every_steps=2", "checkpoint.keep=0"};
  ASSERT_EQ(train(dir, 1, job).result.exit_code, 0);
  const std::string header_edit = ckpt(dir, 4) + "/shard-00000.safetensors";
  patch_same_size(header_edit, "\"model/wte.weight@", "\"model/wte.weighu@");
  auto resumed_job = job;
  resumed_job.push_back("train.steps=6");
  const TrainingRun again = train(dir, 1, resumed_job);
  EXPECT_EQ(again.result.exit_code, 0) << again.result.output;
  EXPECT_TRUE(contains(again.result.output, header_edit + "' is damaged: its checksum does not match")) << again.result.output;
  EXPECT_TRUE(contains(again.result.output, "resumed from " + ckpt(dir, 2) + " at step 2")) << again.result.output;
  const std::string state_edit = ckpt(dir, 6) + "/trainer_state.json";
  patch_same_size(state_edit, "\"step\": 6", "\"step\": 9");
  const auto r = run_process({DTRAIN_BIN, "generate", "--checkpoint", dir + "/ckpt", "--tokens", "5"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, state_edit + "' is damaged")) << r.output;
  EXPECT_TRUE(contains(r.output, "generate: " + ckpt(dir, 4))) << r.output;
}

// The checks behind the checksum, for a checkpoint damaged with its manifest rewritten to match:
// nothing in the model changes unless everything fits.
TEST(Resume, TrainerStateAndTensorsAreCheckedAgainstManifestAndModelBeforeAnythingChanges) {
  const std::string dir = scratch_dir("state_checks");
  Transformer model(model_preset("tiny"), 1);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  FlatParameters flat(named);
  auto optimizer = make_flat_optimizer(json{{"type", "AdamW"}, {"params", json::object()}}, flat.data());
  const json config = {{"optimizer", {{"type", "AdamW"}}}, {"scheduler", {{"type", "constant"}}}};
  CheckpointOptions options;
  options.dir = dir;
  CheckpointManager manager(options, 0, agree_alone());
  TrainerProgress progress;
  progress.step = 20;
  // One rank, holding and writing everything.
  const TrainingLayout layout = data_parallel_layout(model->config(), model, flat, flat.data(),
                                                     BucketShards(make_grad_buckets(flat.entries(), 4, 1 << 20), 1, 0), 0,
                                                     {{"dp_replicate", 0, 1}, {"dp_shard", 0, 1}});
  const std::string step_dir = manager.save(
      20, 0, {true, ""}, [&](const std::string& tmp) { save_training_state(tmp, 0, layout, *optimizer, progress, config); },
      [&](const std::string& tmp) { write_training_index(tmp, layout, *optimizer, model->config()); });
  {
    at::NoGradGuard no_grad;
    flat.data().zero_();
  }
  // A tensor renamed or retyped in the shard's header as well as in the index is a checkpoint of
  // another model, which must not fit; in the index alone, the two disagree.
  struct Case {
    std::string file, from, to, needle, shard_from, shard_to;
  };
  const std::vector<Case> cases = {
      {"trainer_state.json", "\"step\": 20", "\"step\": 99", "says step 99, the manifest says 20"},
      {"trainer_state.json", "{", "[", "is not valid JSON"},
      {"trainer_state.json", "\"lr_scale\": 1.0", "\"lr_scale\": 2.0", "lacks a valid 'lr_scale'"},
      {"index.json", "\"model/wte.weight\"", "\"model/wte.weighu\"", "has no parameter 'wte.weight'", "\"model/wte.weight@",
       "\"model/wte.weighu@"},
      {"index.json", "\"model/wte.weight\"", "\"model/wte.weighu\"", "about tensor 'model/wte.weighu' (its chunk from element 0): the file holds no such chunk"},
      {"index.json", "\"F32\"", "\"I32\"", "has dtype Int, the model expects Float", "\"F32\"", "\"I32\""},
      {"index.json", "\"optimizer/exp_avg/", "\"optimizer/exp_avX/", "has no optimizer state 'exp_avg/", "\"optimizer/exp_avg/",
       "\"optimizer/exp_avX/"},
      {"index.json", "\"size\": [\n      128", "\"size\": [\n      127", "no chunk holds elements 127..127"},
      {"index.json", "\"file\": \"shard-00000", "\"file\": \"../../etc/x", "is not a file of the checkpoint"},
  };
  for (const auto& c : cases) {
    const std::string copy = scratch_dir("state_checks_case") + "/" + CheckpointManager::step_dir_name(20);
    fs::copy(step_dir, copy);
    patch_same_size(copy + "/" + c.file, c.from, c.to);
    if (!c.shard_from.empty()) patch_same_size(copy + "/shard-00000.safetensors", c.shard_from, c.shard_to);
    try {
      load_training_state(copy, layout, *optimizer);
      ADD_FAILURE() << c.file << ": " << c.to << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(contains(e.what(), c.needle)) << e.what();
      EXPECT_TRUE(contains(e.what(), c.file)) << e.what();
    }
    EXPECT_EQ(flat.data().abs().sum().item<double>(), 0) << c.file << ": a refused checkpoint changed the model";
  }
  EXPECT_EQ(load_training_state(step_dir, layout, *optimizer).step, 20);  // and the intact one loads
  EXPECT_GT(flat.data().abs().sum().item<double>(), 0);
}

// Every rank writes its part of a checkpoint: one that cannot (a full disk) fails the save on every
// rank at the next agreement, naming it, rather than leaving the others in a barrier until the
// collective timeout; nothing of that checkpoint stays on disk.
TEST(Resume, AFailedSaveOnOneRankStopsEveryRankAndKeepsNothing) {
  const std::string dir = scratch_dir("save_failure");
  const auto ranks = train_ranks_alone(dir, 2, {"checkpoint.every_steps=2", "checkpoint.keep=0", "dist.timeout_s=120"},
                                       {"DTRAIN_INJECT_SAVE_FAILURE=4:1"});
  EXPECT_NE(ranks[1].exit_code, 0);
  EXPECT_TRUE(contains(ranks[1].output, "no space left on device (injected)")) << ranks[1].output;
  // Rank 0 wrote its part and learns at the commit's agreement that rank 1 did not.
  EXPECT_NE(ranks[0].exit_code, 0);
  EXPECT_TRUE(contains(ranks[0].output, "checkpoint of step 4: rank(s) 1 failed to write their part (their logs say why); nothing of it is kept"))
      << ranks[0].output;
  EXPECT_TRUE(fs::exists(ckpt(dir, 2)));
  EXPECT_FALSE(fs::exists(ckpt(dir, 4)));
  EXPECT_FALSE(fs::exists(ckpt(dir, 4) + ".tmp"));
}

// A rank other than rank 0 (which chose the checkpoint and loaded it) that cannot read its pieces
// stops every rank at once, named, rather than leaving the others in the next collective.
TEST(Resume, ALoadThatFailsOnOneRankStopsEveryRank) {
  const std::string dir = scratch_dir("load_failure");
  ASSERT_EQ(train(dir, 2, {"checkpoint.every_steps=2"}).result.exit_code, 0);
  const auto ranks = train_ranks_alone(dir, 2, {"train.steps=6", "dist.timeout_s=120"}, {"DTRAIN_INJECT_LOAD_FAILURE=4:1"});
  EXPECT_NE(ranks[1].exit_code, 0);
  EXPECT_TRUE(contains(ranks[1].output, "input/output error (injected)")) << ranks[1].output;
  EXPECT_NE(ranks[0].exit_code, 0);
  EXPECT_TRUE(contains(ranks[0].output, "rank 1 could not load " + ckpt(dir, 4) + " (its log says why), so this rank stops too"))
      << ranks[0].output;
}

TEST(Resume, AFatalErrorIsInTheRankLogToo) {
  const std::string dir = scratch_dir("fatal_log");
  // A directory passes the check before launch; that it holds no checkpoint shows only inside the rank.
  std::filesystem::create_directories(dir + "/empty-checkpoints");
  const TrainingRun run = train(dir, 1, {"train.resume=" + dir + "/empty-checkpoints"});
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_TRUE(contains(run.result.output, "empty-checkpoints' holds no committed checkpoint")) << run.result.output;
  EXPECT_TRUE(contains(read_text_file(dir + "/rank-0.log"), "ERROR train.resume: '" + dir + "/empty-checkpoints' holds no committed checkpoint"));
}

// kill -9 at seeded random points of a run that checkpoints every step: mid-training, after a rank's
// files are written, after the manifest, and between the rename and `latest`. The launcher restarts
// the job each time, and it ends exactly where the uninterrupted run ends.
TEST(Resume, KillsAtRandomPointsEndLikeTheUninterruptedRun) {
  const std::vector<std::string> job = {"train.steps=14", "train.deterministic=true", "checkpoint.every_steps=1"};
  std::mt19937 rng(20261123);
  const std::vector<std::string> points = {"step", "save", "manifest", "commit"};
  constexpr int kKills = 5;
  std::string crash_at;
  int64_t step = 1;
  for (int round = 0; round < kKills; ++round) {
    step += 1 + int64_t(rng() % 2);  // each round resumes at or before the last kill's step, so this one is reached
    const std::string point = points[rng() % points.size()];
    const int rank = point == "manifest" || point == "commit" ? 0 : int(rng() % 2);  // rank 0 commits
    crash_at += (crash_at.empty() ? "" : ",") + point + ":" + std::to_string(step) + ":" + std::to_string(round) + ":" + std::to_string(rank);
  }
  const std::string dir = scratch_dir("crashes");
  const TrainingRun crashed = train(dir, 2, job, {"--max-restarts", std::to_string(kKills)}, {"DTRAIN_CRASH_AT=" + crash_at});
  ASSERT_EQ(crashed.result.exit_code, 0) << crash_at << "\n" << crashed.result.output;
  EXPECT_TRUE(contains(crashed.result.output, "restarting the job (restart " + std::to_string(kKills) + " of " + std::to_string(kKills) + ")"))
      << crash_at << "\n" << crashed.result.output;
  const TrainingRun straight = train(scratch_dir("no_crashes"), 2, job);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  ASSERT_EQ(crashed.steps.size(), 14u) << crash_at;
  for (int i = 0; i < 14; ++i) {
    EXPECT_EQ(crashed.steps[i]["step"].get<int>(), i + 1);
    EXPECT_EQ(crashed.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>()) << "step " << i + 1;
  }
  expect_same_parameters(final_parameters(straight, 14), final_parameters(crashed, 14));
}

TEST(RunLock, ARunOrCheckpointDirectoryThatIsAFileIsNamedByItsKey) {
  const std::string dir = scratch_dir("dir_is_file");
  const std::string file = dir + "/plain-file";
  std::ofstream(file) << "not a directory";
  auto r = run_process({DTRAIN_BIN, "train", "--set", "model.preset=tiny", "--set", "train.run_dir=" + file}, 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "train.run_dir: '" + file + "' exists and is not a directory")) << r.output;
  r = run_process({DTRAIN_BIN, "train", "--set", "model.preset=tiny", "--set", "train.run_dir=" + dir + "/run",
                   "--set", "checkpoint.dir=" + file}, 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "checkpoint.dir: '" + file + "' exists and is not a directory")) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/run")) << "a refused start left its run directory behind";
}

// A run directory on a file system of 64 KiB fills up long before step 1000. The run used to log
// into nothing and exit 0, metrics.jsonl cut mid-line and the rank log at 4 KiB. The line that does
// not fit now stops it with an error naming the file, on the console since the log cannot take it;
// both logs end on a whole line, and the checkpoints, kept elsewhere, are there to resume from.
TEST(FullDisk, AFullRunDirectoryStopsTheRunNamingTheFileAndLeavesWholeLines) {
  SmallTmpfs disk("full_run_dir", 64 << 10);
  if (!disk.unavailable().empty()) GTEST_SKIP() << disk.unavailable();
  const std::string checkpoints = scratch_dir("full_run_dir_ckpt");
  const ProcessResult run =
      train_ranks_alone(disk.dir(), 1, {"train.steps=1000", "checkpoint.dir=" + checkpoints, "checkpoint.every_steps=20"})[0];
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_TRUE(contains(run.output, "dtrain train: error: cannot write '" + disk.dir() + "/metrics.jsonl': No space left on device") ||
              contains(run.output, "dtrain train: error: cannot write '" + disk.dir() + "/rank-0.log': No space left on device"))
      << run.output;
  for (const std::string name : {"metrics.jsonl", "rank-0.log"}) {
    const std::string text = read_text_file(disk.dir() + "/" + name);
    ASSERT_FALSE(text.empty()) << name;
    EXPECT_EQ(text.back(), '\n') << name << " ends mid-line";
  }
  std::istringstream metrics(read_text_file(disk.dir() + "/metrics.jsonl"));
  int64_t last_step = 0;
  for (std::string line; std::getline(metrics, line);) last_step = json::parse(line).value("step", int64_t(0));
  EXPECT_GT(last_step, 20);
  EXPECT_LT(last_step, 1000);
  EXPECT_TRUE(fs::exists(checkpoints + "/latest"));
}

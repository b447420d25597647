// End-to-end training through the real CLI: `dtrain run` starts the ranks, and the tests read what
// the runs leave on disk (metrics.jsonl, checkpoints) to compare backends, resumes and freezes (the
// layouts that must train like one rank are rows of test_feature_matrix.cpp).
#include <gtest/gtest.h>
#include <torch/types.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "ckpt/safetensors.h"
#include "launch/worker_env.h"
#include "model/transformer.h"
#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"

using namespace dtrain;
using namespace dtrain::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

// Shared memory (the default on one node), Gloo, and two nodes of two ranks (two agents on
// loopback: shared memory within each, Gloo across) reduce the same buckets in different orders.
TEST(DataParallel, SharedMemoryGlooAndTwoNodesTrainAlike) {
  if (runs_on_gpu()) GTEST_SKIP() << "the shared-memory backend serves ranks that compute on the CPU";
  const std::vector<std::string> job = {"train_batch_size=16", "train_micro_batch_size_per_gpu=4"};
  const TrainingRun shm = train(scratch_dir("backend_shm"), 4, job);
  EXPECT_TRUE(contains(shm.result.output, "backend shm")) << shm.result.output;
  auto with_gloo = job;
  with_gloo.push_back("dist.backend=gloo");
  const TrainingRun gloo = train(scratch_dir("backend_gloo"), 4, with_gloo);
  EXPECT_TRUE(contains(gloo.result.output, "backend gloo")) << gloo.result.output;
  expect_same_training(shm, gloo, 4);

  const std::string dir = scratch_dir("backend_two_nodes");
  const std::string port = std::to_string(free_port());
  auto node = [&](int k) {
    return std::async(std::launch::async, [=] {
      return train(dir, 2, job, {"--nnodes", "2", "--node-rank", std::to_string(k), "--master-port", port});
    });
  };
  auto node0 = node(0), node1 = node(1);
  const TrainingRun second = node1.get();
  ASSERT_EQ(second.result.exit_code, 0) << second.result.output;
  const TrainingRun first = node0.get();  // rank 0 runs here: it writes the metrics and checkpoints
  EXPECT_TRUE(contains(first.result.output, "backend shm+gloo")) << first.result.output;
  expect_same_training(first, shm, 4);
}

TEST(DataParallel, TheFirstBucketIsReducedWhileBackwardIsStillRunning) {
  const TrainingRun run = train(scratch_dir("overlap"), 2, {"zero_optimization.reduce_bucket_size=2000", "wall_clock_breakdown=true"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  ASSERT_EQ(run.steps.size(), 4u);
  for (const auto& s : run.steps) {
    EXPECT_GE(s["first_bucket_launch_ms"].get<double>(), 0) << s.dump();
    EXPECT_LT(s["first_bucket_launch_ms"].get<double>(), s["last_grad_ms"].get<double>()) << s.dump();
    EXPECT_LE(s["comm_hidden_ms"].get<double>(), s["comm_ms"].get<double>()) << s.dump();
  }
  EXPECT_TRUE(contains(run.result.output, "gradient bucket(s)"));
}

TEST(DataParallel, FrozenParametersGetNoGradientNoBucketAndStayAtTheirInitialValues) {
  const TrainingRun run = train(scratch_dir("frozen"), 2, {"train.freeze=[\"wpe.*\",\"blocks.0.*\"]"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  TransformerConfig c = model_preset("tiny");
  Transformer initial(c, 7);
  const auto trained = final_parameters(run, 4);
  int64_t frozen = 0, total = 0;
  for (const auto& item : initial->named_parameters()) {
    const auto& name = item.key();
    total += item.value().numel();
    const bool is_frozen = name.rfind("wpe.", 0) == 0 || name.rfind("blocks.0.", 0) == 0;
    if (is_frozen) {
      frozen += item.value().numel();
      EXPECT_TRUE(torch::equal(trained.at(name), item.value())) << name << " changed although frozen";
    } else if (item.value().dim() >= 2) {
      EXPECT_FALSE(torch::equal(trained.at(name), item.value())) << name << " did not train";
    }
  }
  EXPECT_TRUE(contains(run.result.output, std::to_string(total - frozen) + " trainable parameters")) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, std::to_string(frozen) + " frozen parameters")) << run.result.output;
  const TrainingRun bad = train(scratch_dir("frozen_bad"), 1, {"train.freeze=[\"encoder.*\"]"});
  EXPECT_NE(bad.result.exit_code, 0);
  EXPECT_TRUE(contains(bad.result.output, "'encoder.*' matches no parameter")) << bad.result.output;
}

// Blocks frozen behind frozen embeddings (fine-tuning the top of a model) get no gradient from
// anywhere: recomputing them would have no graph to differentiate, and once stopped the whole run
// with "element 0 of tensors does not require grad". Under every checkpointing mode they now run
// forward only, and the trained blocks learn as without recomputation.
TEST(ActivationCheckpointing, BlocksFrozenBehindFrozenEmbeddingsTrainLikeWithoutRecomputation) {
  const std::vector<std::string> job = {"model.n_layer=3", "train.freeze=[\"wte.*\",\"wpe.*\",\"blocks.0.*\",\"blocks.1.*\"]"};
  const TrainingRun reference = train(scratch_dir("frozen_prefix"), 1, job);
  ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
  for (const std::string mode : {"full", "selective", "every:2"}) {
    auto recomputed = job;
    recomputed.push_back("train.activation_checkpointing=" + mode);
    const TrainingRun run = train(scratch_dir("frozen_prefix_" + mode.substr(0, 5)), 1, recomputed);
    ASSERT_EQ(run.result.exit_code, 0) << mode << "\n" << run.result.output;
    expect_same_training(run, reference, 4);
  }
}

// Under pp a stage holding only frozen parameters has nothing to train: every rank refuses it by
// name before any work starts (it used to stop on its own with "train.freeze froze every
// parameter", which was not so). A split that gives the first stage a trained block trains like one
// rank, the frozen blocks running forward only, and so do interleaved chunks of which the first is
// frozen whole.
TEST(PipelineParallel, AStageOfFrozenParametersIsRefusedAndFrozenBlocksOnTrainedStagesTrainLikeOneRank) {
  const Sets job = {"model.n_layer=4", "train_batch_size=8", "train.freeze=[\"wte.*\",\"wpe.*\",\"blocks.0.*\",\"blocks.1.*\"]"};
  const Sets pp = {"parallel.pp=2", "train_micro_batch_size_per_gpu=2"};
  const std::string refused_dir = scratch_dir("frozen_stage");
  const TrainingRun refused = train(refused_dir, 2, job + pp);
  EXPECT_NE(refused.result.exit_code, 0);
  EXPECT_TRUE(contains(refused.result.output, "parallel.pp: pipeline stage 0 (blocks 0-1, the embeddings) holds only parameters that "
                                              "train.freeze or parallel.modules freeze, so it has nothing to train"))
      << refused.result.output;
  EXPECT_FALSE(std::filesystem::exists(refused_dir + "/metrics.jsonl"));
  auto split = pp;
  split.push_back("parallel.pipeline.split=[3,1]");
  const TrainingRun run = train(scratch_dir("frozen_stage_split"), 2, job + split);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const TrainingRun reference = train(scratch_dir("frozen_stage_reference"), 1, job + Sets{"train_micro_batch_size_per_gpu=8"});
  expect_same_training(run, reference, 4);
  // Interleaved, the first chunk (the embeddings and block 0) is frozen whole and records no graph:
  // its backward has nothing to differentiate (it used to stop the run, as recomputation did).
  auto interleaved = pp;
  interleaved.insert(interleaved.end(), {"parallel.pipeline.schedule=interleaved_1f1b", "parallel.pipeline.virtual_stages=2"});
  const TrainingRun chunks = train(scratch_dir("frozen_chunk"), 2, job + interleaved);
  ASSERT_EQ(chunks.result.exit_code, 0) << chunks.result.output;
  expect_same_training(chunks, reference, 4);
}

TEST(Resume, StoppingAndResumingReproducesTheUninterruptedRun) {
  const std::vector<std::string> job = {"train.steps=6", "train.deterministic=true"};
  const TrainingRun straight = train(scratch_dir("straight"), 2, job);
  const std::string dir = scratch_dir("resumed");
  auto first = job;
  first.push_back("train.stop_at_step=3");
  const TrainingRun half = train(dir, 2, first);
  ASSERT_EQ(half.result.exit_code, 0) << half.result.output;
  ASSERT_EQ(half.steps.size(), 3u);
  const TrainingRun resumed = train(dir, 2, job);
  EXPECT_TRUE(contains(resumed.result.output, "resumed from " + dir + "/ckpt/step-00000003 at step 3 (load ")) << resumed.result.output;
  ASSERT_EQ(resumed.steps.size(), 6u);  // metrics.jsonl continues: 3 lines before the stop, 3 after
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>()) << "step " << i + 1;
  expect_same_parameters(final_parameters(straight, 6), final_parameters(resumed, 6));
}

// The launcher's promise: a worker killed mid-run is noticed, the whole job restarts, resumes from
// the last checkpoint, and ends where the uninterrupted run ends.
TEST(Resume, AKilledWorkerRestartsTheJobWhichResumesAndEndsLikeTheUninterruptedRun) {
  const std::vector<std::string> job = {"model.preset=demo", "train.steps=20", "train.deterministic=true",
                                        "checkpoint.every_steps=3", "train_micro_batch_size_per_gpu=4"};
  const std::string dir = scratch_dir("killed");
  TrainingRun faulty;
  std::atomic<bool> finished{false};
  const int port = free_port();
  std::thread runner([&] {
    faulty = train(dir, 2, job, {"--max-restarts", "1", "--master-port", std::to_string(port)});
    finished = true;
  });
  // Once step 4 is logged, the checkpoint of step 3 is committed: kill one worker then.
  bool killed = false;
  wait_for([&] {
    std::ifstream metrics(dir + "/metrics.jsonl");
    int lines = 0;
    for (std::string line; std::getline(metrics, line);) ++lines;
    if (lines >= 4) {
      const auto workers = processes_with_markers({std::string("\0train\0", 7), "train.run_dir=" + dir});
      killed = !workers.empty() && ::kill(workers.front(), SIGKILL) == 0;
    }
    return killed || finished;
  }, 600);
  runner.join();
  ASSERT_TRUE(killed) << "the run ended before a worker could be killed:\n" << faulty.result.output;
  EXPECT_EQ(faulty.result.exit_code, 0) << faulty.result.output;
  EXPECT_TRUE(contains(faulty.result.output, "signal 9 (SIGKILL)")) << faulty.result.output;
  EXPECT_TRUE(contains(faulty.result.output, "restarting the job (restart 1 of 1)")) << faulty.result.output;
  EXPECT_TRUE(contains(faulty.result.output, "resumed from " + dir + "/ckpt/step-")) << faulty.result.output;
  // Neither attempt left a shared-memory segment behind.
  for (int round : {0, 1})
    for (const auto& e : fs::directory_iterator("/dev/shm"))
      EXPECT_NE(e.path().filename().string().rfind(shared_memory_prefix("127.0.0.1", port, round), 0), 0u) << e.path();
  // metrics.jsonl holds each step once: what the killed attempt logged past its checkpoint is dropped.
  ASSERT_EQ(faulty.steps.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(faulty.steps[i]["step"].get<int>(), i + 1);
  const TrainingRun straight = train(scratch_dir("not_killed"), 2, job);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(faulty.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>()) << "step " << i + 1;
  expect_same_parameters(final_parameters(straight, 20), final_parameters(faulty, 20));
}

TEST(Resume, ATruncatedCheckpointFallsBackToThePreviousOne) {
  const std::string dir = scratch_dir("truncated");
  const TrainingRun first = train(dir, 1, {"checkpoint.every_steps=2", "checkpoint.keep=0"});
  ASSERT_EQ(first.result.exit_code, 0) << first.result.output;
  const std::string damaged = dir + "/ckpt/step-00000004/shard-00000.safetensors";
  fs::resize_file(damaged, fs::file_size(damaged) / 2);
  const TrainingRun again = train(dir, 1, {"train.steps=6", "checkpoint.every_steps=2", "checkpoint.keep=0"});
  EXPECT_EQ(again.result.exit_code, 0) << again.result.output;
  EXPECT_TRUE(contains(again.result.output, damaged)) << again.result.output;
  EXPECT_TRUE(contains(again.result.output, "resumed from " + dir + "/ckpt/step-00000002 at step 2")) << again.result.output;
  // An explicit resume path that is damaged is an error, not a silent fresh start.
  const TrainingRun explicit_path = train(scratch_dir("explicit"), 1, {"train.resume=" + dir + "/ckpt/step-00000099"});
  EXPECT_NE(explicit_path.result.exit_code, 0);
  EXPECT_TRUE(contains(explicit_path.result.output, "step-00000099")) << explicit_path.result.output;
}

TEST(BadInput, EachMistakeExitsNonZeroNamingTheCulprit) {
  const std::string bad_json = scratch_dir("bad_json") + ".json";
  { std::ofstream(bad_json) << "{ train: }"; }
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--set", "train.stesp=3"}, "did you mean 'train.steps'"},
      {{"--set", "bf16.enabled=true", "--set", "data_types.grad_accum_dtype=fp16"}, "'data_types.grad_accum_dtype' is \"fp16\""},
      {{"--set", "train_batch_size=10", "--set", "train_micro_batch_size_per_gpu=4", "--set", "gradient_accumulation_steps=1"},
       "train_batch_size (10)"},
      {{"--set", "data.source=text:/nonexistent/corpus.txt"}, "/nonexistent/corpus.txt"},
      {{"--config", bad_json}, bad_json},
      {{"--config", scratch_dir("config_dir")}, "config_dir' is a directory"},
      {{"--set", "train.steps=0"}, "'train.steps' must be at least 1, got 0"},
      {{"--set", "optimizer.params.lr=1e999"}, "--set 'optimizer.params.lr=1e999': the number is out of range for a double"},
      {{"--set", "data.source=text:" + scratch_dir("data_dir")}, "data_dir' is a directory"},
  };
  for (const auto& c : cases) {
    const std::string dir = scratch_dir("bad_input") + "/run";
    std::vector<std::string> argv = {DTRAIN_BIN, "train", "--set", "model.preset=tiny", "--set", "train.run_dir=" + dir};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_process(argv, 60);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, c.needle)) << r.output;
    EXPECT_FALSE(fs::exists(dir)) << "a failed start left " << dir << " behind";
  }
}

TEST(BadInput, BadFlagsAreRefusedByNameBeforeAnythingStarts) {
  const std::string dir = scratch_dir("bad_flags") + "/run";
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"run", "--max-restarts", "-1"}, "--max-restarts: must be at least 0, got -1"},
      {{"run", "--prompt", ""}, "--prompt must hold at least one character"},
      {{"run", "--set", "train.steps=0"}, "'train.steps' must be at least 1, got 0"},
      {{"generate", "--checkpoint", dir, "--temperature", "nan"}, "--temperature: must be at least 0, got nan"},
      {{"generate", "--checkpoint", dir, "--tokens", "0"}, "--tokens: must be between 1 and 1048576, got 0"},
      {{"generate", "--checkpoint", dir, "--top-k", "-1"}, "--top-k: must be at least 0, got -1"},
      {{"generate", "--checkpoint", dir, "--seed", "-1"}, "--seed: must be at least 0, got -1"},
      {{"bench-comm", "-b", "0"}, "--min-bytes: must be between 1 and 1099511627776, got 0"},  // looped forever
      {{"bench-comm", "-b", "4096", "-e", "1024"}, "--min-bytes 4096 is larger than --max-bytes 1024"},
      {{"bench-comm", "--ops", "all_reduse"}, "unknown collective 'all_reduse'"},
      {{"bench-comm", "--timeout-s", "nan"}, "--timeout-s: must be more than 0 and at most 31536000, got nan"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {DTRAIN_BIN};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    if (c.args[0] == "run") argv.insert(argv.end(), {"--set", "model.preset=tiny", "--set", "train.run_dir=" + dir});
    const auto r = run_process(argv, 60);
    EXPECT_NE(r.exit_code, 0) << c.args[0] << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.needle)) << r.output;
    EXPECT_FALSE(fs::exists(dir)) << "a refused command left " << dir << " behind";
  }
}

TEST(Cli, GenerateSamplesFromACheckpointAndConfigCheckPrintsThePlan) {
  const std::string dir = scratch_dir("generate");
  ASSERT_EQ(train(dir, 1, {}).result.exit_code, 0);
  auto r = run_process({DTRAIN_BIN, "generate", "--checkpoint", dir + "/ckpt", "--prompt", "Hi", "--tokens", "20"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "Hi")) << r.output;
  // The prompt is echoed, and the model may write any byte its data held: neither reaches the terminal raw.
  r = run_process({DTRAIN_BIN, "generate", "--checkpoint", dir + "/ckpt", "--prompt", "\x1b[2J", "--tokens", "20"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "\\x1b[2J")) << r.output;
  EXPECT_FALSE(contains(r.output, "\x1b")) << r.output;
  r = run_process({DTRAIN_BIN, "generate", "--checkpoint", dir + "/nothing"}, 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, dir + "/nothing")) << r.output;
  r = run_process({DTRAIN_BIN, "config", "check", "--world-size", "4", "--set", "train_batch_size=64"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "64 = micro 8 x accumulation 2 x dp 4")) << r.output;  // the demo config fixes micro 8
  r = run_process({DTRAIN_BIN, "config", "check", "--set", "zero_optimization.offload_optimizer={\"device\":\"nvme\"}"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;  // a refused configuration
  EXPECT_TRUE(contains(r.output, "zero_optimization.offload_optimizer")) << r.output;
}

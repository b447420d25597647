// A training job through the real CLI (`dtrain run`), for the end-to-end tests: the tiny model with
// everything fixed, and what the run leaves on disk read back.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/file_checksum.h"
#include "support/process.h"
#include "train/training_state.h"

namespace dtrain::test {

// A small, fast, fully specified job; `sets` add to or override it. AdamW's eps is 1e-6 rather than
// 1e-8: some gradients are exactly zero in exact arithmetic (the key bias: softmax ignores a shift
// shared by all keys), and Adam divides their rounding noise (~1e-10) by its own square root into
// full-size updates whose sign depends on summation order. That is Adam's property, not data
// parallelism's; eps 1e-6 keeps such noise out while real gradients (>1e-4) are untouched.
inline const std::vector<std::string> kBase = {
    "model.preset=tiny", "train.steps=4", "train.seed=7", "train.eval_every=0", "train.peak_flops=1e9",
    "gradient_clipping=1.0", "optimizer.params={\"lr\":0.002,\"weight_decay\":0.1,\"eps\":1e-6}",
    "scheduler={\"type\":\"cosine\",\"params\":{\"warmup_steps\":1}}", "steps_per_print=1"};

struct TrainingRun {
  ProcessResult result;
  std::string dir;
  std::vector<nlohmann::json> steps;  // metrics.jsonl lines that carry a training loss
};

inline TrainingRun train(const std::string& dir, int nproc, const std::vector<std::string>& sets,
                         const std::vector<std::string>& run_flags = {}, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {DTRAIN_BIN, "run", "--nproc-per-node", std::to_string(nproc), "--no-sample",
                                   "--set", "train.run_dir=" + dir};
  argv.insert(argv.end(), run_flags.begin(), run_flags.end());
  for (const auto& s : kBase) argv.insert(argv.end(), {"--set", s});
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  std::vector<std::string> full_env = {"OMP_NUM_THREADS=1"};
  full_env.insert(full_env.end(), env.begin(), env.end());
  TrainingRun run{run_process(argv, 180, full_env), dir, {}};
  std::ifstream metrics(dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) run.steps.push_back(j);
  }
  return run;
}

// The job's ranks as `dtrain train` processes of their own, without the launcher, which would stop
// the others as soon as one fails: what each rank does about another's failure shows in its own
// result (by rank), deterministically.
inline std::vector<ProcessResult> train_ranks_alone(const std::string& dir, int nproc, const std::vector<std::string>& sets,
                                                    const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {DTRAIN_BIN, "train", "--set", "train.run_dir=" + dir};
  for (const auto& s : kBase) argv.insert(argv.end(), {"--set", s});
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  const std::string port = std::to_string(free_port()), world = std::to_string(nproc);
  std::vector<ProcessResult> results(static_cast<size_t>(nproc));
  std::vector<std::thread> ranks;
  for (int r = 0; r < nproc; ++r)
    ranks.emplace_back([&, r] {
      const std::string rank = std::to_string(r);
      std::vector<std::string> full_env = {"OMP_NUM_THREADS=1", "RANK=" + rank, "LOCAL_RANK=" + rank, "WORLD_SIZE=" + world,
                                           "LOCAL_WORLD_SIZE=" + world, "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port};
      full_env.insert(full_env.end(), env.begin(), env.end());
      try {
        results[size_t(r)] = run_process(argv, 180, full_env);
      } catch (const std::exception& e) {  // not out of the thread: that would end the test binary
        results[size_t(r)].output = "could not start rank " + rank + ": " + e.what();
      }
    });
  for (auto& t : ranks) t.join();
  return results;
}

// The checkpoint of `step` in a run directory (checkpoint.dir at its default).
inline std::string ckpt(const std::string& run_dir, int step) { return run_dir + "/ckpt/" + CheckpointManager::step_dir_name(step); }

// Records `file`'s present size and checksum in its checkpoint's manifest (or drops it from the
// manifest when it is gone): a checkpoint changed with its manifest rewritten to match, which the
// checksum alone cannot catch.
inline void reseal(const std::string& checkpoint, const std::string& file) {
  nlohmann::json manifest = nlohmann::json::parse(read_text_file(checkpoint + "/manifest.json"));
  const std::string path = checkpoint + "/" + file;
  if (std::filesystem::exists(path))
    manifest["files"][file] = {{"bytes", std::filesystem::file_size(path)}, {"xxh3", file_checksum(path)}};
  else
    manifest["files"].erase(file);
  write_file_atomically(checkpoint + "/manifest.json", manifest.dump(2));
}

inline std::map<std::string, at::Tensor> final_parameters(const TrainingRun& run, int step) { return read_parameters(ckpt(run.dir, step)); }

// Every parameter equal bit for bit, and none on one side only.
inline void expect_same_parameters(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(at::equal(t, b.at(name))) << name;
}

// What fp32 arithmetic in another summation order may change (a batch of 16 on one rank against
// halves summed by an all-reduce), per step and per element, |got - expected| <= atol + rtol·|expected|:
// - loss and gradient norm: rtol 1e-5, atol 0. The norm is compared because AdamW is blind to a
//   gradient's scale: a missing 1/dp or a bucket reduced twice shows in the norm first.
// - parameters: rtol 1e-6 (a few ulps of the value: decay and update each round at 6e-8), and
//   atol 1e-4 of the largest distance training can move an element, lr per AdamW step: the rounding
//   of the gradient changes a step by a small fraction of its size, whatever the parameter's own size,
//   so a bias that starts at zero gets the same bound as a large weight.
// docs/decisions.md says how the bounds were shown to catch broken averaging, a dropped micro-batch
// and a bucket reduced twice.
constexpr double kLr = 0.002;  // optimizer.params.lr in kBase

inline void expect_close(double got, double expected, double atol, double rtol, const std::string& what) {
  EXPECT_LE(std::abs(got - expected), atol + rtol * std::abs(expected)) << what << ": " << got << " vs " << expected;
}

inline void expect_same_training(const TrainingRun& a, const TrainingRun& b, int steps) {
  ASSERT_EQ(a.result.exit_code, 0) << a.result.output;
  ASSERT_EQ(b.result.exit_code, 0) << b.result.output;
  ASSERT_EQ(int(a.steps.size()), steps);
  ASSERT_EQ(int(b.steps.size()), steps);
  for (int i = 0; i < steps; ++i) {
    const std::string step = "step " + std::to_string(i + 1);
    expect_close(a.steps[i]["loss"], b.steps[i]["loss"], 0, 1e-5, step + " loss");
    expect_close(a.steps[i]["grad_norm"], b.steps[i]["grad_norm"], 0, 1e-5, step + " grad_norm");
  }
  const double atol = 1e-4 * kLr * steps, rtol = 1e-6;
  const auto pa = final_parameters(a, steps), pb = final_parameters(b, steps);
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& [name, expected] : pb) {
    const at::Tensor excess = (pa.at(name) - expected).abs() - (atol + rtol * expected.abs());
    const int64_t worst = excess.flatten().argmax().item<int64_t>();
    EXPECT_LE(excess.flatten()[worst].item<double>(), 0)
        << name << "[" << worst << "]: " << pa.at(name).flatten()[worst].item<double>() << " vs "
        << expected.flatten()[worst].item<double>() << " (atol " << atol << ", rtol " << rtol << ")";
  }
}

}  // namespace dtrain::test

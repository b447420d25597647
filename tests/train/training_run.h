// A training job through the real CLI (`dtrain run`), for the end-to-end tests: the tiny model with
// everything fixed, and what the run leaves on disk read back.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// Config overrides (`--set` arguments), and two lists of them one after the other.
using Sets = std::vector<std::string>;
inline Sets operator+(Sets a, const Sets& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct TrainingRun {
  ProcessResult result;
  std::string dir;
  std::vector<nlohmann::json> steps;        // metrics.jsonl lines that carry a training loss
  std::vector<nlohmann::json> validations;  // and those that carry a validation loss
};

// A finished run of the trainer: its output and its metrics' step and validation lines.
inline TrainingRun finished_run(ProcessResult process, const std::string& dir) {
  TrainingRun run{std::move(process), dir, {}, {}};
  std::ifstream metrics(dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) run.steps.push_back(j);
    if (j.contains("val_loss")) run.validations.push_back(j);
  }
  return run;
}

inline TrainingRun train(const std::string& dir, int nproc, const std::vector<std::string>& sets,
                         const std::vector<std::string>& run_flags = {}, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {DTRAIN_BIN, "run", "--nproc-per-node", std::to_string(nproc), "--no-sample",
                                   "--set", "train.run_dir=" + dir};
  argv.insert(argv.end(), run_flags.begin(), run_flags.end());
  for (const auto& s : kBase) argv.insert(argv.end(), {"--set", s});
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  std::vector<std::string> full_env = {"OMP_NUM_THREADS=1"};
  full_env.insert(full_env.end(), env.begin(), env.end());
  return finished_run(run_process(argv, 180, full_env), dir);
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

// A checkpoint's index.json.
inline nlohmann::json index_of(const std::string& step_dir) { return nlohmann::json::parse(read_text_file(step_dir + "/index.json")); }

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

}  // namespace dtrain::test

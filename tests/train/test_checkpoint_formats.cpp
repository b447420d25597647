// Checkpoints written before index version 2 still resume. A version-1 checkpoint is made here as
// dtrain wrote it then: every tensor cut into flat ranges of its flattened elements, one per rank,
// stored as "tensor@offset" with one dim, and index.json at version 1 listing them (the other files
// of a checkpoint have kept their format).
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"
#include "training_run.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Rewrites the checkpoint `dir` in version 1's format, as `ranks` ranks wrote it (ZeRO's flat ranges,
// the scalars by rank 0), and reseals its manifest to match.
void rewrite_as_version_one(const std::string& dir, int ranks) {
  std::map<std::string, at::Tensor> whole;
  std::map<std::string, GlobalTensor> globals;
  json metadata;
  {
    ShardedCheckpointReader v2(dir);
    ASSERT_EQ(v2.version(), 2);
    metadata = v2.metadata();
    globals = v2.tensors();
    for (const auto& [name, global] : globals) whole[name] = v2.read(name).reshape({-1});
  }
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("shard-", 0) == 0) fs::remove(entry.path());
  std::vector<NamedTensors> files(static_cast<size_t>(ranks));
  for (const auto& [name, t] : whole) {
    const int64_t n = t.numel(), part = (n + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
      const int64_t begin = std::min(n, part * r), end = std::min(n, begin + part);
      if (begin < end) files[size_t(r)].emplace_back(name + "@" + std::to_string(begin), t.narrow(0, begin, end - begin));
    }
  }
  json tensors = json::object();
  for (const auto& [name, global] : globals)
    tensors[name] = {{"dtype", safetensors_dtype_name(global.dtype)}, {"shape", global.shape}, {"chunks", json::array()}};
  for (int r = 0; r < ranks; ++r) {
    const std::string file = shard_file_name(r);
    write_safetensors(dir + "/" + file, files[size_t(r)]);
    for (const auto& e : read_safetensors_header(dir + "/" + file)) {
      const size_t at = e.name.rfind('@');
      tensors[e.name.substr(0, at)]["chunks"].push_back(
          {{"file", file}, {"offset", std::stoll(e.name.substr(at + 1))}, {"numel", e.shape.at(0)}, {"byte_offset", e.begin}});
    }
  }
  write_file_atomically(dir + "/index.json",
                        json{{"format", "dtrain sharded checkpoint"}, {"version", 1}, {"metadata", metadata}, {"tensors", tensors}}.dump(1));
  const json manifest = json::parse(read_text_file(dir + "/manifest.json"));
  for (auto it = manifest["files"].begin(); it != manifest["files"].end(); ++it) reseal(dir, it.key());
  for (int r = 0; r < ranks; ++r) reseal(dir, shard_file_name(r));
}

// A global batch of 4 on any number of ranks, ZeRO-1's flat ranges of the state on two.
std::vector<std::string> job(std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {"train.steps=4", "train_batch_size=4", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=auto",
                                   "zero_optimization.stage=1", "checkpoint.every_steps=2", "checkpoint.keep=0"};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

TEST(Resume, AVersionOneCheckpointResumesLikeTheUninterruptedRun) {
  const TrainingRun straight = train(scratch_dir("v1_straight"), 2, job());
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  for (const int ranks : {2, 1}) {
    const std::string dir = scratch_dir("v1_resumed_on_" + std::to_string(ranks));
    ASSERT_EQ(train(dir, 2, job({"train.stop_at_step=2"})).result.exit_code, 0);
    rewrite_as_version_one(ckpt(dir, 2), 2);
    ASSERT_NO_THROW(CheckpointManager::verify(ckpt(dir, 2)));
    ASSERT_EQ(ShardedCheckpointReader(ckpt(dir, 2)).version(), 1);
    const TrainingRun resumed = train(dir, ranks, job({"zero_optimization.stage=0"}));
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    EXPECT_TRUE(contains(resumed.result.output, "resumed from " + ckpt(dir, 2) + " at step 2")) << resumed.result.output;
    SCOPED_TRACE("a version-1 checkpoint of 2 ranks resumed on " + std::to_string(ranks));
    expect_same_training(resumed, straight, 4);
    EXPECT_EQ(ShardedCheckpointReader(ckpt(dir, 4)).version(), 2);  // what the resumed run saves is version 2
  }
}

}  // namespace
}  // namespace dtrain::test

// A checkpoint's tensors read back whole, and the checkpoint written again in another layout with
// its manifest resealed to match: what tests compare a layout's checkpoint with.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "ckpt/sharded_checkpoint.h"
#include "training_run.h"

namespace dtrain::test {

// Every tensor of a checkpoint, whole and shaped, by its name in the index.
using WholeTensors = std::map<std::string, at::Tensor>;

struct StoredCheckpoint {
  WholeTensors tensors;
  nlohmann::json metadata;  // the index's
  int version = 0;          // of the index
};

inline StoredCheckpoint read_whole_checkpoint(const std::string& dir) {
  ShardedCheckpointReader reader(dir);
  StoredCheckpoint out{{}, reader.metadata(), reader.version()};
  for (const auto& [name, global] : reader.tensors()) out.tensors[name] = reader.read(name);
  return out;
}

// Removes the checkpoint's shard files, for a rewrite to write its own.
inline void remove_shard_files(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("shard-", 0) == 0) std::filesystem::remove(entry.path());
}

// Reseals every file the manifest lists (dropping those now gone) and `written`, new ones.
inline void reseal_all(const std::string& dir, const std::vector<std::string>& written) {
  const nlohmann::json manifest = nlohmann::json::parse(read_text_file(dir + "/manifest.json"));
  for (auto it = manifest["files"].begin(); it != manifest["files"].end(); ++it) reseal(dir, it.key());
  for (const auto& file : written) reseal(dir, file);
}

// Rewrites the checkpoint `dir` as a run on one rank writes it: every tensor whole, in one shard,
// indexed by dtrain's own writer.
inline void rewrite_as_one_rank(const std::string& dir) {
  const StoredCheckpoint stored = read_whole_checkpoint(dir);
  remove_shard_files(dir);
  std::vector<TensorChunk> chunks;
  std::map<std::string, GlobalTensor> globals;
  for (const auto& [name, t] : stored.tensors) {
    chunks.push_back({name, whole_tensor(t.sizes().vec()), t.contiguous()});
    globals[name] = {t.sizes().vec(), t.scalar_type(), {}};
  }
  write_shard_file(dir, 0, chunks);
  write_checkpoint_index(dir, globals, stored.metadata);
  reseal_all(dir, {shard_file_name(0)});
}

}  // namespace dtrain::test

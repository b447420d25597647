// A checkpoint rewritten as dtrain wrote it before index version 2: every tensor cut into flat ranges
// of its flattened elements, one per rank, stored as "tensor@offset" with one dim, and index.json at
// version 1 listing them (the other files of a checkpoint have kept their format). An edit of the
// tensors on the way makes one of an earlier release still (its parameter names).
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "ckpt/safetensors.h"
#include "ckpt/sharded_checkpoint.h"
#include "training_run.h"

namespace dtrain::test {

// Every tensor of a checkpoint, whole and shaped, by its name in the index.
using WholeTensors = std::map<std::string, at::Tensor>;

// Rewrites the checkpoint `dir` in version 1's format, as `ranks` ranks wrote it (ZeRO's flat ranges,
// the scalars by rank 0), its tensors first passed through `edit` when given, and reseals its
// manifest to match.
inline void rewrite_as_version_one(const std::string& dir, int ranks, const std::function<void(WholeTensors&)>& edit = {}) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  WholeTensors whole;
  json metadata;
  {
    ShardedCheckpointReader v2(dir);
    ASSERT_EQ(v2.version(), 2);
    metadata = v2.metadata();
    for (const auto& [name, global] : v2.tensors()) whole[name] = v2.read(name);
  }
  if (edit) edit(whole);
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("shard-", 0) == 0) fs::remove(entry.path());
  std::vector<NamedTensors> files(static_cast<size_t>(ranks));
  json tensors = json::object();
  for (const auto& [name, t] : whole) {
    tensors[name] = {{"dtype", safetensors_dtype_name(t.scalar_type())}, {"shape", t.sizes().vec()}, {"chunks", json::array()}};
    const at::Tensor flat = t.reshape({-1});
    const int64_t n = flat.numel(), part = (n + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
      const int64_t begin = std::min(n, part * r), end = std::min(n, begin + part);
      if (begin < end) files[size_t(r)].emplace_back(name + "@" + std::to_string(begin), flat.narrow(0, begin, end - begin));
    }
  }
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

}  // namespace dtrain::test

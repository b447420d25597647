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
#include "rewritten_checkpoint.h"

namespace dtrain::test {

// Rewrites the checkpoint `dir` in version 1's format, as `ranks` ranks wrote it (ZeRO's flat ranges,
// the scalars by rank 0), its tensors first passed through `edit` when given, and reseals its
// manifest to match.
inline void rewrite_as_version_one(const std::string& dir, int ranks, const std::function<void(WholeTensors&)>& edit = {}) {
  using json = nlohmann::json;
  StoredCheckpoint stored = read_whole_checkpoint(dir);
  ASSERT_EQ(stored.version, 2);
  WholeTensors& whole = stored.tensors;
  if (edit) edit(whole);
  remove_shard_files(dir);
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
                        json{{"format", "dtrain sharded checkpoint"}, {"version", 1}, {"metadata", stored.metadata}, {"tensors", tensors}}.dump(1));
  std::vector<std::string> written;
  for (int r = 0; r < ranks; ++r) written.push_back(shard_file_name(r));
  reseal_all(dir, written);
}

}  // namespace dtrain::test

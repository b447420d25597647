// How many ranks each parallelism spans: the sizes of the device mesh's named dims, outermost first
// (pp, dp_replicate, dp_shard, cp, tp), so that tp neighbours are adjacent ranks, on one node, and
// pipeline stages the furthest apart. Their product is the world size. Pure: no communication;
// comm/device_mesh.h builds the groups from mesh_dims().
//
// dp_replicate x dp_shard are the data-parallel ranks (dp): ranks that read different samples.
// ZeRO shards over dp_shard (with cp: "dp_shard_cp"); hybrid sharding replicates those shards over
// dp_replicate. Without hybrid sharding dp_replicate is 1 and every data-parallel rank is in dp_shard,
// whatever the ZeRO stage (torchtitan's convention: dp_shard is the dim inferred by default).
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct ParallelDims {
  // The dims' names, in mesh order.
  static constexpr std::array<const char*, 5> kNames{"pp", "dp_replicate", "dp_shard", "cp", "tp"};

  int pp = 1;
  int dp_replicate = 1;
  int dp_shard = -1;  // -1: inferred, so that the product is the world size
  int cp = 1;
  int tp = 1;
  // The same dims with the one given as -1 (at most one) inferred, so that the product is
  // `world_size`. Throws std::invalid_argument naming the dims, the config keys they come from
  // (parallel.pp, parallel.dp, parallel.cp, parallel.tp) and the world size.
  ParallelDims resolved(int world_size) const;

  int dp() const { return dp_replicate * dp_shard; }  // ranks that read different samples
  int world_size() const { return pp * dp() * cp * tp; }
  int size(const std::string& dim) const;  // by name; throws for a name that is not a dim

  // Every dim in mesh order with its size, size-1 dims included (their groups cost no backend), as
  // DeviceMesh takes them.
  std::vector<std::pair<std::string, int>> mesh_dims() const;
  // The dims of more than one rank, in mesh order: the parallelisms this layout uses.
  std::vector<std::string> enabled() const;
  bool enabled(const std::string& dim) const { return size(dim) > 1; }

  // "pp 1 x dp_replicate 2 x dp_shard 4 x cp 1 x tp 1".
  std::string describe() const;
};

}  // namespace dtrain

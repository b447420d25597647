#include "parallel/parallel_dims.h"

#include <algorithm>
#include <stdexcept>

namespace dtrain {
namespace {

constexpr size_t kDims = ParallelDims::kNames.size();

// The config key each dim's size comes from, in mesh order: dp_replicate x dp_shard is parallel.dp
// (hybrid sharding splits it by parallel.fsdp.shard_group_size).
constexpr std::array<const char*, kDims> kKeys{"parallel.pp", "parallel.dp", "parallel.dp", "parallel.cp", "parallel.tp"};

std::array<int, kDims> sizes_of(const ParallelDims& d) { return {d.pp, d.dp_replicate, d.dp_shard, d.cp, d.tp}; }

// "dp_shard (parallel.dp)": a dim as the user knows it.
std::string named(size_t i) { return std::string(ParallelDims::kNames[i]) + " (" + kKeys[i] + ")"; }

// "pp 1 x dp_replicate 1 x cp 1 x tp 2", leaving out dim `skip` (none when out of range).
std::string product_text(const std::array<int, kDims>& sizes, size_t skip = kDims) {
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (i != skip) s += (s.empty() ? "" : " x ") + std::string(ParallelDims::kNames[i]) + " " + std::to_string(sizes[i]);
  return s;
}

// "parallel.pp, parallel.dp, parallel.cp, parallel.tp": each key once, in mesh order, less `skip`'s.
std::string keys_text(const std::string& skip = "") {
  std::vector<std::string> keys;
  for (const char* key : kKeys)
    if (key != skip && std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  std::string s;
  for (const auto& key : keys) s += (s.empty() ? "" : ", ") + key;
  return s;
}

}  // namespace

ParallelDims ParallelDims::resolved(int world_size) const {
  const std::array<int, kDims> sizes = sizes_of(*this);
  size_t inferred = kDims;
  long long others = 1;  // the product of the dims not inferred; long long: five ints can overflow int
  for (size_t i = 0; i < kDims; ++i) {
    if (sizes[i] == -1) {
      if (inferred < kDims)
        throw std::invalid_argument("only one parallel dim may be inferred (-1), but " + named(inferred) + " and " +
                                    named(i) + " both are");
      inferred = i;
    } else if (sizes[i] < 1) {
      throw std::invalid_argument(named(i) + " is " + std::to_string(sizes[i]) +
                                  "; a parallel dim spans a whole number of ranks, at least 1");
    } else {
      others *= sizes[i];
    }
  }
  ParallelDims out = *this;
  if (inferred < kDims) {
    if (world_size % others != 0)
      throw std::invalid_argument(named(inferred) + " is inferred from the world size " + std::to_string(world_size) +
                                  ", which the other dims (" + keys_text(kKeys[inferred]) + ": " + product_text(sizes, inferred) +
                                  " = " + std::to_string(others) + ") do not divide");
    const int size = int(world_size / others);
    int* dims[] = {&out.pp, &out.dp_replicate, &out.dp_shard, &out.cp, &out.tp};
    *dims[inferred] = size;
  } else if (others != world_size) {
    throw std::invalid_argument("the parallel dims (" + keys_text() + ") span " + product_text(sizes) + " = " +
                                std::to_string(others) + " ranks, but the world size is " + std::to_string(world_size));
  }
  return out;
}

int ParallelDims::size(const std::string& dim) const {
  const std::array<int, kDims> sizes = sizes_of(*this);
  for (size_t i = 0; i < kDims; ++i)
    if (dim == kNames[i]) return sizes[i];
  throw std::invalid_argument("'" + dim + "' is not a parallel dim (they are pp, dp_replicate, dp_shard, cp, tp)");
}

std::vector<std::pair<std::string, int>> ParallelDims::mesh_dims() const {
  std::vector<std::pair<std::string, int>> dims;
  const std::array<int, kDims> sizes = sizes_of(*this);
  for (size_t i = 0; i < kDims; ++i) dims.emplace_back(kNames[i], sizes[i]);
  return dims;
}

std::vector<std::string> ParallelDims::enabled() const {
  std::vector<std::string> names;
  for (const auto& [name, size] : mesh_dims())
    if (size > 1) names.push_back(name);
  return names;
}

std::string ParallelDims::describe() const { return product_text(sizes_of(*this)); }

}  // namespace dtrain

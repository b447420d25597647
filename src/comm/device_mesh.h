// A device mesh: the world's ranks laid out row-major over named dimensions (outermost first, e.g.
// pp, dp, cp, tp — so tp neighbours are adjacent ranks, on one node), with one process group per
// line along each dimension. Parallelisms ask for the group of their dimension: mesh.group("tp").
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/world.h"

namespace dtrain {

struct MeshDim {
  std::string name;
  int size = 1;
};

// Checks names and sizes and infers at most one size given as -1, so that the product is the world
// size. Errors name the dimensions and the world size.
std::vector<MeshDim> resolve_mesh_dims(const std::vector<std::pair<std::string, int>>& dims, int world_size);

// The groups along dimension `d`: every list of global ranks that differ only in their coordinate
// on `d`, each ordered by that coordinate. Pure: no communication.
std::vector<std::vector<int>> mesh_groups(const std::vector<MeshDim>& dims, size_t d);

class DeviceMesh {
 public:
  // Every rank builds every group of every dimension, in the same order.
  DeviceMesh(World& world, const std::vector<std::pair<std::string, int>>& dims);

  std::shared_ptr<Group> group(const std::string& dim) const;
  int size(const std::string& dim) const;
  int coord(const std::string& dim) const;  // this rank's coordinate along `dim`
  const std::vector<MeshDim>& dims() const { return dims_; }

 private:
  size_t index(const std::string& dim) const;

  std::vector<MeshDim> dims_;
  std::vector<std::shared_ptr<Group>> groups_;  // this rank's group along each dim
  std::vector<int> coords_;                     // this rank's coordinate along each dim
};

}  // namespace dtrain

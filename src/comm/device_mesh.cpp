#include "comm/device_mesh.h"

#include <set>
#include <sstream>
#include <stdexcept>

namespace dtrain {
namespace {
std::string describe(const std::vector<std::pair<std::string, int>>& dims) {
  std::ostringstream s;
  s << "{";
  for (size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i].first << ": " << dims[i].second;
  s << "}";
  return s.str();
}
}  // namespace

std::vector<MeshDim> resolve_mesh_dims(const std::vector<std::pair<std::string, int>>& dims, int world_size) {
  if (dims.empty()) throw std::invalid_argument("device mesh needs at least one dimension");
  std::set<std::string> names;
  int inferred = -1;
  int64_t product = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto& [name, size] = dims[i];
    if (name.empty() || !names.insert(name).second)
      throw std::invalid_argument("device mesh " + describe(dims) + ": dimension name '" + name +
                                  "' is empty or repeated");
    if (size == -1) {
      if (inferred >= 0)
        throw std::invalid_argument("device mesh " + describe(dims) + ": only one dimension may be -1 (inferred), but '" +
                                    dims[inferred].first + "' and '" + name + "' both are");
      inferred = static_cast<int>(i);
    } else if (size < 1) {
      throw std::invalid_argument("device mesh " + describe(dims) + ": dimension '" + name + "' has size " +
                                  std::to_string(size));
    } else {
      product *= size;
    }
  }
  std::vector<MeshDim> out;
  for (const auto& [name, size] : dims) out.push_back({name, size});
  if (inferred >= 0) {
    if (world_size % product != 0)
      throw std::invalid_argument("device mesh " + describe(dims) + ": world size " + std::to_string(world_size) +
                                  " is not divisible by the product of the other dimensions (" +
                                  std::to_string(product) + ")");
    out[inferred].size = static_cast<int>(world_size / product);
  } else if (product != world_size) {
    throw std::invalid_argument("device mesh " + describe(dims) + ": the product of the dimensions is " +
                                std::to_string(product) + ", but the world size is " + std::to_string(world_size));
  }
  return out;
}

std::vector<std::vector<int>> mesh_groups(const std::vector<MeshDim>& dims, size_t d) {
  int world = 1, stride = 1;
  for (const auto& m : dims) world *= m.size;
  for (size_t i = d + 1; i < dims.size(); ++i) stride *= dims[i].size;
  const int span = stride * dims[d].size;  // ranks covered by one step of the dims outside d
  std::vector<std::vector<int>> groups;
  for (int base = 0; base < world; base += span) {
    for (int offset = 0; offset < stride; ++offset) {
      std::vector<int> g;
      for (int c = 0; c < dims[d].size; ++c) g.push_back(base + offset + c * stride);
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

DeviceMesh::DeviceMesh(World& world, const std::vector<std::pair<std::string, int>>& dims)
    : dims_(resolve_mesh_dims(dims, world.size())) {
  for (size_t d = 0; d < dims_.size(); ++d) {
    std::shared_ptr<Group> mine;
    for (const auto& ranks : mesh_groups(dims_, d)) {
      auto g = world.new_group(dims_[d].name, ranks);
      if (g) {
        mine = g;
        coords_.push_back(g->rank());
      }
    }
    groups_.push_back(mine);
  }
}

size_t DeviceMesh::index(const std::string& dim) const {
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == dim) return i;
  std::string known;
  for (const auto& d : dims_) known += (known.empty() ? "" : ", ") + d.name;
  throw std::invalid_argument("device mesh has no dimension '" + dim + "' (it has " + known + ")");
}

std::shared_ptr<Group> DeviceMesh::group(const std::string& dim) const { return groups_[index(dim)]; }
int DeviceMesh::size(const std::string& dim) const { return dims_[index(dim)].size; }
int DeviceMesh::coord(const std::string& dim) const { return coords_[index(dim)]; }

}  // namespace dtrain

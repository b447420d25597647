#include "comm/device_mesh.h"

#include <algorithm>
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

int mesh_rank(const std::vector<MeshDim>& dims, const std::vector<int>& coords) {
  int rank = 0;
  for (size_t i = 0; i < dims.size(); ++i) rank = rank * dims[i].size + coords[i];
  return rank;
}

std::vector<int> mesh_coords(const std::vector<MeshDim>& dims, int rank) {
  std::vector<int> coords(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    coords[i] = rank % dims[i].size;
    rank /= dims[i].size;
  }
  return coords;
}

std::vector<std::vector<int>> mesh_groups(const std::vector<MeshDim>& dims, const std::vector<size_t>& over) {
  for (size_t k = 0; k < over.size(); ++k)
    if (over[k] >= dims.size() || (k > 0 && over[k] <= over[k - 1]))
      throw std::invalid_argument("mesh groups: the dims a group spans must be distinct mesh dims, in mesh order");
  int world = 1, members = 1;
  for (const auto& m : dims) world *= m.size;
  for (size_t d : over) members *= dims[d].size;
  std::vector<std::vector<int>> groups;
  for (int first = 0; first < world; ++first) {
    std::vector<int> coords = mesh_coords(dims, first);
    bool starts_group = true;  // a group's first member is at coordinate 0 on every dim it spans
    for (size_t d : over) starts_group = starts_group && coords[d] == 0;
    if (!starts_group) continue;
    std::vector<int> g;
    for (int m = 0; m < members; ++m) {
      int rest = m;  // m's coordinates on `over`, row-major
      for (size_t k = over.size(); k-- > 0;) {
        coords[over[k]] = rest % dims[over[k]].size;
        rest /= dims[over[k]].size;
      }
      g.push_back(mesh_rank(dims, coords));
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<std::vector<int>> mesh_groups(const std::vector<MeshDim>& dims, size_t d) { return mesh_groups(dims, std::vector<size_t>{d}); }

std::vector<MeshGroups> mesh_group_plan(const std::vector<MeshDim>& dims) {
  // The data-parallel reductions: the loss and gradients over dp (x cp), ZeRO's shards over dp_shard (x cp).
  static const std::pair<const char*, std::vector<std::string>> kFlattened[] = {
      {"dp", {"dp_replicate", "dp_shard"}},
      {"dp_cp", {"dp_replicate", "dp_shard", "cp"}},
      {"dp_shard_cp", {"dp_shard", "cp"}},
  };
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i].name == name) return i;
    return dims.size();
  };
  std::vector<MeshGroups> plan;
  for (size_t d = 0; d < dims.size(); ++d) plan.push_back({dims[d].name, {d}, mesh_groups(dims, d)});
  for (const auto& [name, parts] : kFlattened) {
    if (index_of(name) < dims.size()) continue;
    std::vector<size_t> over;
    for (const auto& part : parts)
      if (const size_t i = index_of(part); i < dims.size()) over.push_back(i);
    if (over.empty()) continue;
    std::sort(over.begin(), over.end());
    plan.push_back({name, over, mesh_groups(dims, over)});
  }
  return plan;
}

DeviceMesh::DeviceMesh(World& world, const std::vector<std::pair<std::string, int>>& dims)
    : layout_(resolve_mesh_dims(dims, world.size())), coords_(mesh_coords(layout_, world.rank())) {
  for (auto& kind : mesh_group_plan(layout_)) {
    std::shared_ptr<Group> mine;
    for (const auto& ranks : kind.groups)
      if (auto g = world.new_group(kind.name, ranks)) mine = g;
    Entry e{{kind.name, mine->size()}, std::move(kind.over), mine, std::move(kind.groups)};
    if (e.over.size() == 1 && layout_[e.over[0]].name == kind.name) {
      entries_.push_back(e);
      dims_.push_back(e.dim);
    } else {
      flattened_.push_back(e);
    }
  }
}

const DeviceMesh::Entry& DeviceMesh::entry(const std::string& name) const {
  for (const auto* list : {&entries_, &flattened_})
    for (const auto& e : *list)
      if (e.dim.name == name) return e;
  std::string known;
  for (const auto* list : {&entries_, &flattened_})
    for (const auto& e : *list) known += (known.empty() ? "" : ", ") + e.dim.name;
  throw std::invalid_argument("device mesh has no dimension or group '" + name + "' (it has " + known + ")");
}

std::shared_ptr<Group> DeviceMesh::group(const std::string& name) const { return entry(name).group; }
int DeviceMesh::size(const std::string& name) const { return entry(name).dim.size; }
int DeviceMesh::coord(const std::string& name) const { return entry(name).group->rank(); }

const std::vector<int>& DeviceMesh::members(const std::string& name, int rank) const {
  for (const auto& g : entry(name).all_groups)
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  int world = 1;
  for (const auto& d : layout_) world *= d.size;
  throw std::invalid_argument("device mesh: rank " + std::to_string(rank) + " is outside the mesh of " + std::to_string(world) + " ranks");
}

DeviceMesh DeviceMesh::sub(const std::vector<std::string>& names) const {
  DeviceMesh view;
  view.layout_ = layout_;
  view.coords_ = coords_;
  std::vector<size_t> spanned;
  for (const auto& name : names) {
    const Entry& e = entry(name);
    for (size_t d : e.over) {
      if (!spanned.empty() && d <= spanned.back()) {
        std::string asked;
        for (const auto& n : names) asked += (asked.empty() ? "" : ", ") + n;
        throw std::invalid_argument("sub-mesh {" + asked + "}: its dims must span distinct mesh dims, in mesh order");
      }
      spanned.push_back(d);
    }
    view.entries_.push_back(e);
    view.dims_.push_back(e.dim);
  }
  return view;
}

int DeviceMesh::rank_at(const std::vector<int>& coords) const {
  if (coords.size() != entries_.size())
    throw std::invalid_argument("rank_at: " + std::to_string(coords.size()) + " coordinate(s) for a mesh of " +
                                std::to_string(entries_.size()) + " dim(s)");
  std::vector<int> at = coords_;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (coords[i] < 0 || coords[i] >= e.dim.size)
      throw std::invalid_argument("rank_at: coordinate " + std::to_string(coords[i]) + " is outside dim " + e.dim.name +
                                  " of size " + std::to_string(e.dim.size));
    int rest = coords[i];  // a flattened coordinate, row-major over the dims it spans
    for (size_t k = e.over.size(); k-- > 0;) {
      at[e.over[k]] = rest % layout_[e.over[k]].size;
      rest /= layout_[e.over[k]].size;
    }
  }
  return mesh_rank(layout_, at);
}

}  // namespace dtrain

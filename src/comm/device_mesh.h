// A device mesh: the world's ranks laid out row-major over named dims, outermost first (pp,
// dp_replicate, dp_shard, cp, tp: parallel/parallel_dims.h — so tp neighbours are adjacent ranks, on
// one node), with one process group per line along each dim, and flattened groups that span several
// dims under a name of their own ("dp" = dp_replicate x dp_shard). Parallelisms ask for the group of
// the dims they reduce over, by name: mesh.group("tp"), mesh.group("dp_cp"). A sub-mesh is a view of
// some of the dims.
//
// Every rank creates every group, in the same order (c10d's rule for new_group): mesh_group_plan()
// is that order, and is pure, so the layout is tested without communication. A group of one rank
// has no backend, and a group of the same ranks as another shares its communicator
// (World::new_group), so size-1 dims and flattened groups equal to a dim's cost nothing. Every group
// has the world's timeout, and its name is in the error a timeout gives.
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

// A global rank and its coordinates, one per dim, row-major (the last dim varies fastest).
int mesh_rank(const std::vector<MeshDim>& dims, const std::vector<int>& coords);
std::vector<int> mesh_coords(const std::vector<MeshDim>& dims, int rank);

// The groups over the dims `over` (indices into `dims`, increasing): every list of global ranks that
// differ only in their coordinates on those dims, each ordered row-major by those coordinates (so a
// member's group rank is its flattened coordinate), the lists ordered by their first rank.
std::vector<std::vector<int>> mesh_groups(const std::vector<MeshDim>& dims, const std::vector<size_t>& over);
// Along the one dim `d`.
std::vector<std::vector<int>> mesh_groups(const std::vector<MeshDim>& dims, size_t d);

// One kind of group in a mesh: a dim (`over` its one index) or a flattened group, and its groups.
struct MeshGroups {
  std::string name;
  std::vector<size_t> over;  // the dims it spans, increasing
  std::vector<std::vector<int>> groups;
};

// Every group a mesh over `dims` creates, in creation order: each dim's, then the flattened groups
// "dp" (dp_replicate x dp_shard), "dp_cp" (dp_replicate x dp_shard x cp) and "dp_shard_cp"
// (dp_shard x cp), each over those of its dims the mesh has; one whose dims the mesh has none of, or
// whose name is a dim's, is left out. Pure: no communication.
std::vector<MeshGroups> mesh_group_plan(const std::vector<MeshDim>& dims);

class DeviceMesh {
 public:
  // Every rank builds every group of mesh_group_plan(), in its order.
  DeviceMesh(World& world, const std::vector<std::pair<std::string, int>>& dims);

  // A dim's or a flattened group's (a sub-mesh: one of its own dims'): this rank's group, the group's
  // size, and this rank's coordinate (its rank in the group).
  std::shared_ptr<Group> group(const std::string& name) const;
  int size(const std::string& name) const;
  int coord(const std::string& name) const;
  // This mesh's dims, in order (a sub-mesh: its own).
  const std::vector<MeshDim>& dims() const { return dims_; }
  // The global ranks of the group `name` that global rank `rank` is in, in group-rank order: any
  // rank's group, not only this one's (no communication).
  const std::vector<int>& members(const std::string& name, int rank) const;

  // A view of the dims or flattened groups `names`, given in mesh order and spanning distinct dims:
  // group, size and coord answer for them, and rank_at takes a coordinate on each.
  DeviceMesh sub(const std::vector<std::string>& names) const;
  // The global rank at `coords`, one per dim of this mesh in order; the dims outside a sub-mesh keep
  // this rank's coordinates.
  int rank_at(const std::vector<int>& coords) const;

 private:
  struct Entry {
    MeshDim dim;
    std::vector<size_t> over;  // the whole mesh's dims it spans
    std::shared_ptr<Group> group;
    std::vector<std::vector<int>> all_groups;  // every rank's group of this kind (mesh_group_plan)
  };
  DeviceMesh() = default;
  const Entry& entry(const std::string& name) const;

  std::vector<MeshDim> layout_;   // the whole mesh's dims
  std::vector<int> coords_;       // this rank's coordinate along each of layout_
  std::vector<Entry> entries_;    // this mesh's dims, in order (the whole mesh: layout_'s)
  std::vector<MeshDim> dims_;     // entries_' dims, for dims()
  std::vector<Entry> flattened_;  // the whole mesh's flattened groups (a sub-mesh has none of its own)
};

}  // namespace dtrain

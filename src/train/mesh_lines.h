// What the run's first lines say of its layout: the mesh's dims, and which global ranks form each
// group, so that a reader of the log sees which ranks a collective joins without working it out.
// Pure: the groups are mesh_group_plan's (comm/device_mesh.h), computed without communication.
#pragma once
#include <string>
#include <vector>

#include "parallel/parallel_dims.h"

namespace dtrain {

// For resolved dims, two lines:
//   "mesh: dp_shard 2 x tp 2 (pp, dp_replicate, cp 1)"
//   "dp_shard groups: [0,2] [1,3]; tp groups: [0,1] [2,3]"
// The mesh names its dims of more than one rank, in mesh order, then those of one. The groups line
// has each kind of group of more than one rank, in the order the mesh creates them, once: a
// flattened group (dp, dp_cp, dp_shard_cp) appears only where its groups differ from every kind
// listed before it. Past 8 groups of a kind the rest are counted, not listed; a group of more than
// 8 ranks shows its first three and its last: "[0,2,4,...,62] (32 ranks)".
// One rank: "mesh: 1 rank (pp, dp_replicate, dp_shard, cp, tp 1)" alone.
std::vector<std::string> mesh_lines(const ParallelDims& dims);

}  // namespace dtrain

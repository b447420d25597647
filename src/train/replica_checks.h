// Checks that every rank's copy of what the plan replicates is the same, before a checkpoint
// writes one of them, and that the parameters are finite. Both are collectives over the world, and
// every rank reaches the same answer.
#pragma once
#include <cstdint>

#include "comm/world.h"
#include "train/parallelize.h"

namespace dtrain {

// What is replicated is written from one rank's copy, so every copy must be the same: the parameters
// at stages 0-2 and the frozen ones on every rank, and at stage 3 each shard across the replica
// groups of hybrid sharding (compared where it lies: no rank gathers the model), and across each tp
// group what tensor parallelism leaves whole (norms, positions, shared key/value weights). A copy that differs
// (a bug, or a silent fault on its machine) throws naming the rank and the one it differs from,
// after `step`. With `inject_drift` this rank's first parameter moves by one ulp first (tests).
void check_replicas_agree(ParallelPlan& plan, World& world, int64_t step, bool inject_drift);

// Whether every parameter on every rank is finite.
bool parameters_finite(ParallelPlan& plan, World& world);

}  // namespace dtrain

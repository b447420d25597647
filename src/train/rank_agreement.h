// Agreement between the ranks on what happened. A decision rank 0 takes and every rank follows, through the store: the others wait for its answer
// under `key`, and when rank 0 fails every rank fails alike — with a ConfigError where rank 0's was
// one, so the launcher sees a refused configuration whichever rank ends first.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_manager.h"
#include "comm/world.h"

namespace dtrain {

std::string agree(World& world, const std::string& key, const std::function<std::string()>& decide);

// Every rank says whether its part of `what` succeeded; all learn which did not (a collective over
// the world, named after `what`).
std::vector<int> ranks_that_failed(World& world, bool ok, const std::string& what);

// ranks_that_failed through a store connection of its own rather than a collective, for a thread
// other than the one that issues the training's collectives (checkpoint.async's saves), which must
// not interleave with them on the same groups. Each call is the next of a sequence every rank calls
// alike, its answers under "<what>/<call>/<rank>"; a rank that has not answered within `timeout`
// (dist.timeout_s) is named in the error.
AgreeOnFailures ranks_that_failed_through_store(World& world, const std::string& what, std::chrono::milliseconds timeout);

}  // namespace dtrain

// Agreement between the ranks on what happened. A decision rank 0 takes and every rank follows, through the store: the others wait for its answer
// under `key`, and when rank 0 fails every rank fails alike — with a ConfigError where rank 0's was
// one, so the launcher sees a refused configuration whichever rank ends first.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "comm/world.h"

namespace dtrain {

std::string agree(World& world, const std::string& key, const std::function<std::string()>& decide);

// Every rank says whether its part of `what` succeeded; all learn which did not (a collective over
// the world, named after `what`).
std::vector<int> ranks_that_failed(World& world, bool ok, const std::string& what);

}  // namespace dtrain

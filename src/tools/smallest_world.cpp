#include "tools/smallest_world.h"

#include <climits>

#include "train/config_reader.h"
#include "train/config_schema.h"
#include "train/config_sections.h"

namespace dtrain {

TrainConfig resolve_at_smallest_world(const std::string& path, const std::vector<std::string>& sets, const std::string& origin) {
  nlohmann::json user = read_config_file(path);
  apply_overrides(user, sets);
  TrainConfig moved;
  nlohmann::json dims = user;
  drop_moved_keys(dims, moved);
  nlohmann::json merged = config_defaults();
  merge_checked(merged, dims, "", origin);
  const Reader r(merged, origin);
  const long long world = (long long)r.small_integer("parallel.pp", 1) * r.small_integer("parallel.cp", 1) *
                          r.small_integer("parallel.tp", 1) * r.integer_or_auto("parallel.dp", 1, INT_MAX).value_or(1);
  if (world > INT_MAX) fail(origin, "parallel.pp x parallel.cp x parallel.tp x parallel.dp is " + std::to_string(world) + " ranks, too many");
  return resolve_config(user, int(world), origin);
}

}  // namespace dtrain

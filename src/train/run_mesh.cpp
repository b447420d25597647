#include "train/run_mesh.h"

#include "train/auto_micro_batch.h"
#include "train/mesh_lines.h"
#include "train/tensor_parallel_rules.h"

namespace dtrain {

std::shared_ptr<DeviceMesh> make_run_mesh(World& world, TrainConfig& config, std::vector<std::string>& setup_lines) {
  resolve_shard_group_per_node(config, world.env().local_world_size);
  warn_if_tp_spans_nodes(config, world.env().local_world_size);
  resolve_auto_micro_batch(world, config, setup_lines);  // after the shard groups, which the estimate reads
  auto mesh = std::make_shared<DeviceMesh>(world, config.parallel.mesh_dims());
  for (std::string& line : mesh_lines(config.parallel)) setup_lines.push_back(std::move(line));
  return mesh;
}

}  // namespace dtrain

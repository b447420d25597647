// The run's device mesh, built once the node's size is known.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "comm/world.h"
#include "train/train_config.h"

namespace dtrain {

// Resolves into `config` what needs a node's ranks (hybrid sharding's groups of a node; a warning when
// a tp group spans nodes; a micro-batch that memory decides, train/auto_micro_batch.h), builds the mesh whose groups every reduction names, and adds its lines
// (the mesh and its groups, mesh_lines.h) to `setup_lines`.
std::shared_ptr<DeviceMesh> make_run_mesh(World& world, TrainConfig& config, std::vector<std::string>& setup_lines);

}  // namespace dtrain

#include "train/rank_runtime.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <cstdlib>

#include "launch/host_capacity.h"
#include "train/host_memory.h"

namespace dtrain {

void configure_rank_runtime(const TrainConfig& config, World& world, std::vector<std::string>& setup_lines) {
  // ATen, MKL and oneDNN share LibTorch's one OpenMP pool (MKL uses its GNU OpenMP layer): this
  // sizes all three, so nothing oversubscribes the cores.
  at::set_num_threads(rank_threads(config.threads, world.env().local_world_size));
  setup_lines.push_back(keep_freed_host_memory());
  map_large_blocks_while_setting_up();
  if (config.deterministic) {
    // cuBLAS is deterministic only with a fixed workspace, read when its first handle is made;
    // without it ATen refuses every CUDA matmul under deterministic algorithms. An explicit setting wins.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
    at::globalContext().setDeterministicAlgorithms(true, false);
  }
}

}  // namespace dtrain

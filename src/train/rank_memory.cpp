#include "train/rank_memory.h"

#include <algorithm>
#include <sstream>

#include "common/byte_words.h"
#include "launch/host_capacity.h"
#include "optim/flat_optimizer.h"
#include "tools/estimate/memory_estimate.h"
#include "train/estimate_layout.h"

namespace dtrain {
double optimizer_state_bytes(const nlohmann::json& spec) {
  double bytes = 0;
  for (const auto& entry : make_flat_optimizer(spec, at::zeros({1}))->state_entries())
    if (entry.flat) bytes += double(c10::elementSize(entry.dtype));
  return bytes;
}

RankMemory rank_memory_floor(const TrainConfig& c, bool state_on_gpu) {
  RankMemory m;
  m.bytes = kRankProcessBytes;
  m.how = byte_words(kRankProcessBytes) + " for the process";
  if (state_on_gpu) return m;
  const double dp = std::max(1, c.dp);
  // Stage 1 shards the optimizer state, 2 the gradients too, 3 the weights too; NVMe offload keeps
  // the state it takes on disk.
  const double weights = c.offload_param.device == "nvme" ? 0 : 4 / (c.zero_stage >= 3 ? dp : 1);
  const double gradients = (c.grad_accum_16bit ? 2 : 4) / (c.zero_stage >= 2 ? dp : 1);
  const double optimizer = c.offload_optimizer.device == "nvme" ? 0 : optimizer_state_bytes(c.optimizer) / (c.zero_stage >= 1 ? dp : 1);
  const double per_parameter = weights + gradients + optimizer;
  const double parameters = double(c.model.parameter_count());
  m.bytes += parameters * per_parameter;
  std::ostringstream how;
  how << c.model.parameter_count() << " parameters × " << per_parameter
      << " bytes for weights, gradients and optimizer state";
  if (c.zero_stage > 0) how << " (ZeRO stage " << c.zero_stage << " over " << c.dp << " ranks)";
  m.how = how.str() + ", and " + m.how;
  return m;
}

double estimated_rank_peak_on_host(const TrainConfig& c, bool state_on_gpu, int ranks_per_node) {
  if (state_on_gpu) return 0;
  const MemoryEstimate estimate = estimate_memory(estimate_layout(c, /*device_is_cpu=*/true, ranks_per_node));
  return estimate.covered() ? estimate.most_loaded().device_bytes() : 0;
}

}  // namespace dtrain

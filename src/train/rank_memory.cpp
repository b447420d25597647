#include "train/rank_memory.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "launch/host_capacity.h"

namespace dtrain {
namespace {

// Bytes of optimizer state per parameter.
double optimizer_bytes(const nlohmann::json& spec) {
  std::string type = spec.value("type", "AdamW");
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (type == "sgd") {
    const auto params = spec.value("params", nlohmann::json::object());
    const auto momentum = params.find("momentum");
    return momentum != params.end() && momentum->is_number() && momentum->get<double>() != 0 ? 4 : 0;
  }
  return 8;  // AdamW and Adam: two fp32 moments
}

}  // namespace

RankMemory rank_memory_floor(const TrainConfig& c, bool state_on_gpu) {
  RankMemory m;
  m.bytes = kRankProcessBytes;
  m.how = bytes_words(kRankProcessBytes) + " for the process";
  if (state_on_gpu) return m;
  const double dp = std::max(1, c.dp);
  // Stage 1 shards the optimizer state, 2 the gradients too, 3 the weights too; NVMe offload keeps
  // the state it takes on disk.
  const double weights = c.offload_param.device == "nvme" ? 0 : 4 / (c.zero_stage >= 3 ? dp : 1);
  const double gradients = (c.grad_accum_16bit ? 2 : 4) / (c.zero_stage >= 2 ? dp : 1);
  const double optimizer = c.offload_optimizer.device == "nvme" ? 0 : optimizer_bytes(c.optimizer) / (c.zero_stage >= 1 ? dp : 1);
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

}  // namespace dtrain

#include "train/shard_optimizer.h"

#include <algorithm>

#include "common/number_text.h"
#include "common/printable.h"
#include "parallel/zero/host_offload_optimizer.h"
#include "parallel/zero/nvme_optimizer.h"
#include "train/config_errors.h"

namespace dtrain {

namespace {

std::unique_ptr<ElementwiseOptimizer> make_nvme_optimizer(const TrainConfig& c, FullyShardedParameters* sharded, int64_t numel,
                                                          at::TensorOptions options, std::vector<std::string>& setup_lines) {
  const std::string key = "zero_optimization.offload_optimizer";
  const int64_t sub_group = sub_group_numel(numel, c.sub_group_size.value_or(0));
  std::unique_ptr<NvmeOptimizer> nvme;
  offload_to_nvme(key, [&] {
    nvme = std::make_unique<NvmeOptimizer>(make_elementwise_rule(c.optimizer), numel, options,
                                           NvmeOffloadOptions{c.offload_optimizer.nvme_path, sub_group});
  });
  if (sharded && sharded->shard_in_file()) nvme->stream_parameters_from(sharded->shard_file(), sharded->shard_file_name());
  const std::string sized =
      c.sub_group_size ? ""
                       : " (zero_optimization.sub_group_size unset: sub-groups sized for buffers of 1/" +
                             std::to_string(kAutoSubGroupBufferShare) + " of the streamed state, and of at least " +
                             std::to_string(kMinAutoSubGroup) + " elements)";
  setup_lines.push_back(key + ".device=nvme: optimizer state (" + mib(nvme->offloaded_bytes()) + " MiB) in unnamed files under " +
                        printable(c.offload_optimizer.nvme_path) + ", streamed in " + std::to_string((numel + sub_group - 1) / sub_group) +
                        " sub-group(s) of " + std::to_string(sub_group) + " elements through " + mib(nvme->resident_bytes()) +
                        " MiB of buffers" + sized + "; I/O by " + nvme->io_mode());
  if (c.sub_group_size && nvme->resident_bytes() >= nvme->streamed_bytes())
    setup_lines.push_back("warning: zero_optimization.sub_group_size " + std::to_string(*c.sub_group_size) +
                          " leaves the buffers as large as the " + std::to_string(numel) +
                          "-element state they stream, so offloading saves no memory; set it to " +
                          std::to_string(std::max<int64_t>(1, numel / 16)) + " or so");
  return nvme;
}

}  // namespace

// On an accelerator an offloaded state is updated by the CPU, where it is
// (parallel/zero/host_offload_optimizer.h).
std::unique_ptr<ElementwiseOptimizer> make_shard_optimizer(const TrainConfig& c, at::Device device, const FlatParameters& flat,
                                                           FullyShardedParameters* sharded, int64_t numel,
                                                           std::vector<std::string>& setup_lines) {
  const std::string& where = c.offload_optimizer.device;
  const bool on_host = !device.is_cpu() && where != "none";
  const at::TensorOptions options = on_host ? flat.options().device(at::kCPU) : flat.options();
  std::unique_ptr<ElementwiseOptimizer> inner = where == "nvme" ? make_nvme_optimizer(c, sharded, numel, options, setup_lines)
                                                                : make_flat_optimizer(c.optimizer, at::empty({numel}, options));
  if (!on_host) return inner;
  const bool params_on_host = sharded && sharded->shard().device() != device;
  auto offloaded = std::make_unique<HostOffloadOptimizer>(std::move(inner), numel, flat.options(), device, params_on_host);
  setup_lines.push_back("zero_optimization.offload_optimizer.device=" + where + ": the optimizer state is updated on the CPU where it lives, " +
                        "nothing of it on the " + device.str() + "; " + mib(offloaded->host_bytes()) + " MiB of host memory with the " +
                        (params_on_host ? "gradients'" : "gradients' and parameters'") + " staging buffers");
  return offloaded;
}

}  // namespace dtrain

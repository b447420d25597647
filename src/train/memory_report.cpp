#include "train/memory_report.h"

#include <sys/resource.h>

#include <algorithm>

#include "comm/collectives.h"
#include "common/byte_words.h"
#include "common/number_text.h"
#include "train/estimate_layout.h"
#include "train/host_memory.h"
#include "train/tensor_memory.h"

namespace dtrain {

namespace {

int64_t peak_rss_bytes() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;
}

std::string signed_percent(double fraction) { return (fraction >= 0 ? "+" : "") + fixed(100 * fraction, 1) + "%"; }

}  // namespace

std::string estimate_against_measured(double estimated, double measured) {
  return "estimated " + byte_words(estimated) + ", measured " + byte_words(measured) + ", " +
         signed_percent((measured - estimated) / estimated);
}

MemoryReport::MemoryReport(const TrainConfig& config, World& world, int pp_stage)
    : world_(world),
      pp_stage_(pp_stage),
      estimate_(estimate_memory(estimate_layout(config, world.device().is_cpu(), world.env().local_world_size))) {}

void MemoryReport::step_begins() {
  if (!rss_window_started_) steps_rss_measured_ = reset_peak_resident();
  rss_window_started_ = true;
  reset_tensor_memory_peak(world_.device());
}

void MemoryReport::step_ends() {
  const TensorMemory m = tensor_memory(world_.device());
  measured_ = world_.device().is_cuda() || cpu_tensor_memory_tracked();
  measured_peak_ = std::max(measured_peak_, m.peak);
  reserved_peak_ = std::max(reserved_peak_, m.reserved);
}

void MemoryReport::finish(int64_t step, RankLog& log, MetricsLog* metrics) {
  // Per rank: the estimate of its tensors (0: none), the measured peak (-1: not measured), its
  // reserved peak (CUDA), its peak RSS and its peak RSS from the first step on (-1: not measured).
  const double estimated = estimate_.covered() ? estimate_.of_stage(pp_stage_).tensor_bytes() : 0;
  const double steps_rss = steps_rss_measured_ ? double(peak_resident_bytes()) : -1.0;
  const auto mine =
      at::tensor({estimated, measured_ ? double(measured_peak_) : -1.0, double(reserved_peak_), double(peak_rss_bytes()), steps_rss},
                 at::kDouble)
          .reshape({1, 5})
          .to(world_.device());
  const at::Tensor all = all_gather(*world_.world_group(), mine, "memory report").cpu();
  const bool cuda = world_.device().is_cuda();
  std::string line = "memory: ";
  if (!estimate_.covered())
    line += estimate_.no_estimate + "; measured " + (measured_ ? byte_words(double(measured_peak_)) : "nothing");
  else if (measured_)
    line += estimate_against_measured(estimated, double(measured_peak_));
  else
    line += "estimated " + byte_words(estimated) + ", not measured (the CPU allocator is not tracked)";
  line += std::string(" (peak ") +
          (cuda ? "allocated by the caching allocator during the steps, reserved " + byte_words(double(reserved_peak_))
                : "tensor bytes during the steps") +
          "); peak RSS " + byte_words(double(peak_rss_bytes())) +
          (steps_rss_measured_ ? ", " + byte_words(steps_rss) + " from the first step on" : "");
  log.info(line);
  if (!metrics) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < int(all.size(0)); ++r) {
    const auto v = all[r];
    nlohmann::json rank = {{"rank", r}, {"peak_rss_bytes", int64_t(v[3].item<double>())}};
    const double e = v[0].item<double>(), m = v[1].item<double>();
    if (e > 0) rank["estimated_bytes"] = int64_t(e);
    if (m >= 0) rank["measured_peak_bytes"] = int64_t(m);
    if (e > 0 && m >= 0) rank["error"] = (m - e) / e;
    if (cuda) rank["reserved_peak_bytes"] = int64_t(v[2].item<double>());
    if (v[4].item<double>() >= 0) rank["steps_peak_rss_bytes"] = int64_t(v[4].item<double>());
    ranks.push_back(rank);
  }
  nlohmann::json memory = {{"measured", cuda ? "peak allocated by the CUDA caching allocator during the steps"
                                             : "peak tensor bytes of the CPU allocator during the steps"},
                           {"ranks", ranks}};
  if (!estimate_.covered())
    memory["estimate"] = estimate_.no_estimate;
  else
    memory["peak_moment"] = estimate_.most_loaded().peak_moment;
  metrics->write({{"step", step}, {"memory", memory}});
}

}  // namespace dtrain

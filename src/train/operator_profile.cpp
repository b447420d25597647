#include "train/operator_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <set>

namespace dtrain {

namespace {

using torch::profiler::impl::ActivityType;

std::set<ActivityType> activities(const at::Device& device) {
  std::set<ActivityType> a = {ActivityType::CPU};
  if (device.is_cuda()) a.insert(ActivityType::CUDA);
  return a;
}

torch::profiler::impl::ProfilerConfig config() {
  return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO, /*report_input_shapes=*/true);
}

}  // namespace

std::unique_ptr<OperatorProfile> OperatorProfile::for_start(const TrainConfig& config, int rank, int64_t start_step, at::Device device,
                                                            RankLog& log) {
  if (config.profile_first == 0) return nullptr;
  if (start_step >= config.profile_first) {
    log.warn("train.profile_steps [" + std::to_string(config.profile_first) + ", " + std::to_string(config.profile_last) +
             "]: this start begins after step " + std::to_string(start_step) + ", so nothing is profiled");
    return nullptr;
  }
  return std::make_unique<OperatorProfile>(config.profile_first, config.profile_last,
                                           config.run_dir + "/profile-rank-" + std::to_string(rank) + ".json", device, log);
}

OperatorProfile::OperatorProfile(int64_t first, int64_t last, std::string path, at::Device device, RankLog& log)
    : first_(first), last_(last), path_(std::move(path)), device_(device), log_(log) {
  torch::autograd::profiler::prepareProfiler(config(), activities(device_));
}

OperatorProfile::~OperatorProfile() {
  if (recording_) torch::autograd::profiler::disableProfiler();
}

void OperatorProfile::step_begins(int64_t step) {
  if (step != first_ || recording_) return;
  torch::autograd::profiler::enableProfiler(config(), activities(device_));
  recording_ = true;
}

void OperatorProfile::step_ends(int64_t step) {
  if (step != last_ || !recording_) return;
  recording_ = false;
  const auto result = torch::autograd::profiler::disableProfiler();
  // Written beside and renamed, so that a reader never opens half a trace.
  const std::string partial = path_ + ".partial";
  result->save(partial);
  std::filesystem::rename(partial, path_);
  log_.info("profile: steps " + std::to_string(first_) + ".." + std::to_string(last_) + " (" + std::to_string(result->events().size()) +
            " operator and kernel events) in " + path_);
}

}  // namespace dtrain

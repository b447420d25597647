#include "train/membership_change.h"

#include <chrono>
#include <string>

#include "common/number_text.h"

namespace dtrain {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int world_of(const nlohmann::json& saved) {
  const nlohmann::json parallel = saved.value("parallel", nlohmann::json::object());
  int world = 1;
  for (const char* dim : {"dp", "tp", "pp", "cp"}) {
    const auto it = parallel.find(dim);
    if (it != parallel.end() && it->is_number_integer()) world *= it->get<int>();
  }
  return world;
}

}  // namespace

void MembershipChange::resumed_from(const nlohmann::json& saved) {
  if (!old_world_) old_world_ = world_of(saved);
}

void MembershipChange::redoes(const std::vector<nlohmann::json>& forgotten) {
  if (done_) return;
  for (const auto& record : forgotten)
    if (record.contains("loss")) redone_s_ += record.value("step_s", 0.0);
}

void MembershipChange::first_step_done(int64_t step, int world_size, MetricsLog* metrics, RankLog& log) {
  if (done_) return;
  done_ = true;
  if (!old_world_ || *old_world_ == world_size) return;
  const double since_failure = failure_time_ ? unix_now() - *failure_time_ : 0;
  const double lost_s = since_failure + redone_s_;
  if (metrics)
    metrics->write({{"event", "membership"}, {"step", step}, {"old_world", *old_world_}, {"new_world", world_size}, {"lost_s", lost_s}});
  log.info("membership changed after step " + std::to_string(step) + ": " + std::to_string(*old_world_) + " -> " +
           std::to_string(world_size) + " ranks; " + fixed(lost_s, 2) + " s lost (" +
           (failure_time_ ? fixed(since_failure, 2) + " s from the failure to the end of the first step at the new size, " : "") +
           fixed(redone_s_, 2) + " s of steps done again)");
}

}  // namespace dtrain

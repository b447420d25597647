// The metrics line that marks a change of the number of ranks between two starts of a run (an
// elastic restart at another world size, or a resume at another size): rank 0 writes, once, at the
// end of the first step of the new start and before that step's own line,
//   {"event": "membership", "step": S, "old_world": W0, "new_world": W1, "lost_s": T}
// S: the steps done before the change (the checkpoint resumed); T: the wall time from the failure
// the launcher reported (DTRAIN_FAILURE_TIME, Unix seconds) to the end of that first step, plus the
// step times metrics.jsonl holds for the steps the previous start did after S, which this one redoes.
// The old world size is the launcher's DTRAIN_PREVIOUS_WORLD_SIZE, or without it the one the resumed
// checkpoint's config.json was trained at.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>

#include "train/metrics_log.h"
#include "train/rank_log.h"

namespace dtrain {

class MembershipChange {
 public:
  // The launcher's DTRAIN_PREVIOUS_WORLD_SIZE and DTRAIN_FAILURE_TIME (WorkerEnv), where it set them.
  MembershipChange(std::optional<int> previous_world_size, std::optional<double> failure_time)
      : old_world_(previous_world_size), failure_time_(failure_time) {}
  // A resume from a checkpoint trained with the config `saved`.
  void resumed_from(const nlohmann::json& saved);
  // The metrics lines of the steps a resume forgets (MetricsLog::forget_after): the previous start
  // did them and this one does them again. Ignored after the first step: a rollback is no change.
  void redoes(const std::vector<nlohmann::json>& forgotten);
  // At the end of the first step of this start, `step` steps having been done before it, on
  // `world_size` ranks: the metrics line (where `metrics` is not null) and a log line, if the world changed.
  void first_step_done(int64_t step, int world_size, MetricsLog* metrics, RankLog& log);

 private:
  std::optional<int> old_world_;
  std::optional<double> failure_time_;
  double redone_s_ = 0;
  bool done_ = false;
};

}  // namespace dtrain

// Event-driven timing of a pipeline schedule's compute actions for given per-action costs: each rank
// runs its list in order, and an action starts once its rank is free and its inputs exist (F(mb,c)
// after F(mb,c-1); B(mb,c), or I(mb,c), after F(mb,c) and after B/I(mb,c+1); W(mb,c) after I(mb,c)),
// an input from another rank arriving `comm` after it was sent. As the executor does, a rank sends
// asynchronously when it reaches a send in its list and waits at a receive until the data is there;
// neither takes the rank's time. Pure.
#pragma once
#include <vector>

#include "parallel/pipeline/pipeline_schedule.h"

namespace dtrain {

// One chunk's cost of each action, in any common unit. zero_bubble splits B into I = B - W and W.
struct PipelineCosts {
  double forward = 1, backward = 2, weight = 1;
  double comm = 0;  // added to every dependency that crosses ranks
  double input() const { return backward - weight; }
  // Throws std::invalid_argument naming the cost at fault (F and B above 0, W in [0, B)).
  void validate() const;
  double of(PipelineAction::Kind kind) const;
};

struct TimedAction {
  PipelineAction action;
  double start = 0, end = 0;
};

struct PipelineTimeline {
  std::vector<std::vector<TimedAction>> ranks;  // each rank's compute actions, in its order
  double makespan = 0;
  std::vector<double> busy;       // per rank, the time it computes
  double bubble_fraction = 0;     // idle time of all ranks / (pp · makespan)
  double idle_time() const;       // of all ranks together
  std::vector<int64_t> peak_in_flight;
};

// Throws std::invalid_argument when a compute action waits on one that never runs (a schedule the
// checker refuses), naming it.
PipelineTimeline simulate_pipeline(const PipelineSchedule& schedule, const PipelineCosts& costs = {});
// The same with each chunk's own costs (per_chunk[c] for chunk c, one per chunk of the schedule), as
// a run's trace measures them: the chunk with the head, or with a large embedding, costs more than
// the others, and the ranks that wait for it idle longer than mean costs say. Throws
// std::invalid_argument when per_chunk does not hold one entry per chunk.
PipelineTimeline simulate_pipeline(const PipelineSchedule& schedule, const std::vector<PipelineCosts>& per_chunk);

// The analytic bubble fraction for costs without communication: gpipe and 1f1b (p-1)/(m+p-1), and
// interleaved_1f1b (p-1)/(v·m+p-1), whatever F and B cost; zero_bubble (ZB-H1) (p-1)/(3m+p-1), idling
// (p-1)·(F+I-W) per rank, a third of 1F1B's, for F = I = W and m >= p, and NaN elsewhere.
double closed_form_bubble(ScheduleKind kind, int pp, int virtual_stages, int micro_batches, const PipelineCosts& costs = {});
// The formula closed_form_bubble evaluates, in words for a reader: "(p-1)/(m+p-1)".
std::string closed_form_text(ScheduleKind kind);

}  // namespace dtrain

// Checks that a pipeline schedule can run and computes what the step should: every (micro-batch,
// chunk) goes forward once and backward once on its chunk's rank; each F before its B (I before W);
// a send after the compute that produces it and a receive before the compute that consumes it; for
// every ordered pair of ranks, the sends from one equal the receives at the other, in the same order
// (the executor posts receives per channel in that order); no deadlock even when every send blocks
// until its receive is reached (rendezvous); and no rank holding more micro-batches than the
// schedule's in-flight limit. Pure.
#pragma once
#include <string>

#include "parallel/pipeline/pipeline_schedule.h"

namespace dtrain {

// "" when `schedule` has every property above; otherwise the first violation found, naming the rank
// and the action.
std::string check_schedule(const PipelineSchedule& schedule);

}  // namespace dtrain

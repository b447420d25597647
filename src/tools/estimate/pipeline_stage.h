// What one pipeline stage holds of the model and of a step (parallel/pipeline): its blocks, the
// embeddings on the first stage, the final norm and head on the last (a tied table's copy too), and
// the micro-batches whose activations it holds at once, which the schedule sets (Narayanan et al.
// 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", §2.2:
// GPipe keeps all m micro-batches of a step in flight, 1F1B at most pp - stage), counted from the
// schedule's own action lists (pipeline_schedule.h's peak_in_flight). Without pipeline parallelism
// one stage holds everything and one micro-batch at a time.
#pragma once
#include <vector>

#include "tools/estimate/memory_layout.h"

namespace dtrain {

struct PipelineStage {
  int stage = 0, pp = 1;
  int blocks = 0, first_block = 0;
  bool first = true, last = true;
  int in_flight = 1;      // micro-batches whose activations the stage holds at its busiest
  int micro_batches = 1;  // per step
  bool pipelined() const { return pp > 1; }
};

// Every stage of `layout`'s pipeline, in order (one without pp).
std::vector<PipelineStage> pipeline_stages(const MemoryLayout& layout);

}  // namespace dtrain

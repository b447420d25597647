// What parallel.pipeline.* asks of a pipeline-parallel run: the schedule, the chunks each pp rank
// holds, and how the model's blocks are cut into them. The config fills it (train/pipeline_config.h);
// the number of pp ranks is the mesh's (ParallelDims::pp), the micro-batches per step are
// gradient_accumulation_steps.
#pragma once
#include <vector>

#include "parallel/pipeline/schedule_kind.h"

namespace dtrain {

struct PipelineOptions {
  ScheduleKind schedule = ScheduleKind::OneFOneB;  // parallel.pipeline.schedule
  // parallel.pipeline.virtual_stages: chunks per pp rank; above 1 only under interleaved_1f1b.
  int virtual_stages = 1;
  // Blocks per chunk, pp × virtual_stages of them, each ≥ 1, summing to model.n_layer. Filled at
  // config time from the cost model or parallel.pipeline.split; empty while measure_split is set.
  std::vector<int> split;
  // parallel.pipeline.split "auto": parallelize() times the parts in a short probe and fills split.
  bool measure_split = false;
};

}  // namespace dtrain

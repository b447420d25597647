#include "tools/estimate/pipeline_stage.h"

#include "parallel/pipeline/pipeline_schedule.h"

namespace dtrain {

std::vector<PipelineStage> pipeline_stages(const MemoryLayout& l) {
  const int pp = l.pp, m = int(l.accumulation), L = l.model.n_layer;
  if (pp == 1) return {PipelineStage{0, 1, L, 0, true, true, 1, m}};
  // A split "auto" is timed when a run starts; until then the blocks are spread evenly.
  std::vector<int> split = l.split;
  if (int(split.size()) != pp) {
    split.assign(size_t(pp), L / pp);
    for (int s = 0; s < L % pp; ++s) ++split[size_t(s)];
  }
  const std::vector<int64_t> in_flight = peak_in_flight(make_schedule(l.schedule, pp, l.virtual_stages, m));
  std::vector<PipelineStage> stages;
  int first_block = 0;
  for (int s = 0; s < pp; ++s) {
    stages.push_back({s, pp, split[size_t(s)], first_block, s == 0, s == pp - 1, int(in_flight[size_t(s)]), m});
    first_block += split[size_t(s)];
  }
  return stages;
}

}  // namespace dtrain

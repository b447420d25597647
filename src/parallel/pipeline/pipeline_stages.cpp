#include "parallel/pipeline/pipeline_stages.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "model/parameter_shapes.h"

namespace dtrain {

std::vector<BlockRange> chunk_ranges(const std::vector<int>& split) {
  std::vector<BlockRange> out;
  int first = 0;
  for (int blocks : split) {
    out.push_back({first, first + blocks});
    first += blocks;
  }
  return out;
}

TransformerParts stage_parts(const std::vector<BlockRange>& chunks, int pp, int coord, int n_layer) {
  std::vector<BlockRange> mine;
  for (size_t c = size_t(coord); c < chunks.size(); c += size_t(pp)) mine.push_back(chunks[c]);
  return TransformerParts::stages(mine, n_layer);
}

ModelPlacements stage_placements(const TransformerConfig& config, const std::vector<BlockRange>& chunks, int pp) {
  const int last = int(chunks.size()) - 1;
  auto stage_of_block = [&](int block) {
    for (int c = 0; c <= last; ++c)
      if (block >= chunks[size_t(c)].first && block < chunks[size_t(c)].end) return c % pp;
    throw std::logic_error("block " + std::to_string(block) + " is in no pipeline chunk");
  };
  ModelPlacements out;
  for (const ParameterShape& s : parameter_shapes(config)) {
    const std::string& name = s.name;
    std::vector<int> stages;
    if (name.rfind("wte.", 0) == 0) {
      stages = {0};
      if (config.tie_embeddings && last % pp != 0) stages.push_back(last % pp);
    } else if (name.rfind("wpe.", 0) == 0) {
      stages = {0};
    } else if (const std::optional<int> block = block_of(config, name)) {
      stages = {stage_of_block(*block)};
    } else {  // ln_f, lm_head
      stages = {last % pp};
    }
    out[name] = {{"pp", Placement::held_by(stages)}};
  }
  return out;
}

PipelineStages make_pipeline_stages(World& world, const DeviceMesh& mesh, const TransformerConfig& config, const std::vector<int>& split,
                                    ScheduleKind schedule, int virtual_stages, int micro_batches) {
  PipelineStages s;
  const int pp = mesh.size("pp");
  s.pp = mesh.group("pp");
  s.chunks = chunk_ranges(split);
  for (int c = s.pp->rank(); c < int(s.chunks.size()); c += pp) s.local_chunks.push_back(c);
  s.placements = stage_placements(config, s.chunks, pp);
  s.schedule = make_schedule(schedule, pp, virtual_stages, micro_batches);
  // The tied embedding's copies sit on the first and the last stage of every pipeline. Every rank
  // creates every pipeline's group, in rank order, as c10d requires.
  const int last = int(s.chunks.size()) - 1;
  if (config.tie_embeddings && last % pp != 0) {
    for (int r = 0; r < world.size(); ++r) {
      const std::vector<int>& line = mesh.members("pp", r);
      if (line.front() != r) continue;
      auto group = world.new_group("embedding", {line.front(), line[size_t(last % pp)]});
      if (group) s.embedding = std::move(group);
    }
  }
  std::string blocks;
  for (const BlockRange& r : s.chunks) blocks += (blocks.empty() ? "" : ", ") + std::to_string(r.end - r.first);
  std::string mine;
  for (int c : s.local_chunks)
    mine += (mine.empty() ? "" : ", ") + std::string("chunk ") + std::to_string(c) + " (blocks " + std::to_string(s.chunks[size_t(c)].first) +
            ".." + std::to_string(s.chunks[size_t(c)].end - 1) + ")";
  s.setup_lines.push_back("pipeline parallel: pp " + std::to_string(pp) + " x " + std::to_string(virtual_stages) + " virtual stage(s), " +
                          std::to_string(s.chunks.size()) + " chunks of " + blocks + " blocks, schedule " + schedule_name(schedule) + ", " +
                          std::to_string(micro_batches) + " micro-batches per step; this rank (stage " + std::to_string(s.pp->rank()) +
                          ") holds " + mine + (s.embedding ? "; the tied embedding's gradient summed with stage " +
                                                                 std::to_string(last % pp) + "'s copy"
                                                           : ""));
  return s;
}

}  // namespace dtrain

// What each pipeline rank holds: chunk c of pp x virtual_stages on pp coordinate c % pp, its blocks
// and no others', the embedding with chunk 0 and the head with the last; and the placement every
// parameter of the whole model gets, the same on every rank, a tied embedding held by the first and
// the last stage.
#include <gtest/gtest.h>

#include <set>

#include "model/parameter_shapes.h"
#include "model/transformer.h"
#include "parallel/pipeline/pipeline_stages.h"

using namespace dtrain;

namespace {

TransformerConfig model(int n_layer, bool tied) {
  TransformerConfig c = model_preset("tiny");
  c.n_layer = n_layer;
  c.tie_embeddings = tied;
  return c;
}

std::vector<int> stages_of(const ModelPlacements& placements, const std::string& name) {
  const auto& p = placements.at(name);
  EXPECT_EQ(p.size(), 1u) << name;
  EXPECT_EQ(p[0].first, "pp") << name;
  EXPECT_EQ(p[0].second.kind, Placement::Kind::Stages) << name;
  return p[0].second.stages;
}

}  // namespace

TEST(PipelineStages, InterleavedChunksGoRoundTheRanksAndEachRankBuildsOnlyItsOwn) {
  const TransformerConfig c = model(8, true);
  const std::vector<BlockRange> chunks = chunk_ranges({1, 2, 3, 2});
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[2].first, 3);
  EXPECT_EQ(chunks[2].end, 6);
  // pp 2 x 2 virtual stages: rank 0 holds chunks 0 and 2, rank 1 chunks 1 and 3.
  const TransformerParts first = stage_parts(chunks, 2, 0, c.n_layer), second = stage_parts(chunks, 2, 1, c.n_layer);
  EXPECT_EQ(first.block_indices(c.n_layer), (std::vector<int>{0, 3, 4, 5}));
  EXPECT_EQ(second.block_indices(c.n_layer), (std::vector<int>{1, 2, 6, 7}));
  EXPECT_TRUE(first.embedding && !first.head);
  EXPECT_TRUE(!second.embedding && second.head);
  // The two ranks' models hold every parameter of the whole model between them, the tied embedding twice.
  std::multiset<std::string> held;
  for (const TransformerParts& parts : {first, second})
    for (const auto& item : Transformer(c, 1, parts)->named_parameters()) held.insert(item.key());
  for (const ParameterShape& s : parameter_shapes(c)) EXPECT_EQ(held.count(s.name), s.name == "wte.weight" ? 2u : 1u) << s.name;
  EXPECT_EQ(held.size(), parameter_shapes(c).size() + 1);
}

TEST(PipelineStages, EveryParameterIsPlacedOnTheStagesThatHoldIt) {
  const std::vector<BlockRange> chunks = chunk_ranges({2, 2, 2, 2});
  const ModelPlacements tied = stage_placements(model(8, true), chunks, 4);
  EXPECT_EQ(stages_of(tied, "wte.weight"), (std::vector<int>{0, 3}));
  EXPECT_EQ(stages_of(tied, "wpe.weight"), (std::vector<int>{0}));
  EXPECT_EQ(stages_of(tied, "blocks.5.q_proj.weight"), (std::vector<int>{2}));
  EXPECT_EQ(stages_of(tied, "ln_f.weight"), (std::vector<int>{3}));
  EXPECT_EQ(tied.size(), parameter_shapes(model(8, true)).size());
  const ModelPlacements untied = stage_placements(model(8, false), chunks, 4);
  EXPECT_EQ(stages_of(untied, "wte.weight"), (std::vector<int>{0}));
  EXPECT_EQ(stages_of(untied, "lm_head.weight"), (std::vector<int>{3}));
  // pp 2 x 2 virtual stages: the last chunk (3) is on rank 1, block 4 (chunk 2) on rank 0.
  const ModelPlacements interleaved = stage_placements(model(8, true), chunks, 2);
  EXPECT_EQ(stages_of(interleaved, "wte.weight"), (std::vector<int>{0, 1}));
  EXPECT_EQ(stages_of(interleaved, "blocks.4.up_proj.weight"), (std::vector<int>{0}));
}

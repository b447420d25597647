// What a training step holds on top of the model states, at each moment that can be its peak. The
// counting allocator (train/tensor_memory.h) shows a step's peak at one of four moments, which one
// depending on the shapes: when the head's backward begins (every activation still saved, and the
// logits' gradient beside them: small vocabularies, or many blocks recomputed), during the last
// block's backward (its gradients beside every block's activations, or under full recomputation
// beside its recomputed ones: wide MLPs), when the embeddings' backward adds the lookup's gradient
// to the tied table's (large vocabularies, few tokens), or after the optimizer step (ZeRO 1-2's
// all-gathers of the updated shard, when activations are small). The estimate is the largest.
#pragma once
#include <string>
#include <vector>

#include "tools/estimate/memory_estimate.h"
#include "tools/estimate/model_states.h"

namespace dtrain {

struct StepMoment {
  std::string name;
  std::vector<MemoryTerm> terms;  // what is alive then besides the model states
  double bytes() const;
};

// The moments of one pipeline stage's step (the whole model's without pp), `counts` its parameters.
std::vector<StepMoment> step_moments(const MemoryLayout& layout, const ParameterCounts& counts, const PipelineStage& stage);

}  // namespace dtrain

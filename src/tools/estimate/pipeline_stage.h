// What one pipeline stage holds of the model and of a step (parallel/pipeline): its chunks' blocks
// (one chunk per rank, or virtual_stages of them under interleaved_1f1b: chunk c on rank c % pp), the
// embeddings on the first stage, the final norm and head on the last (a tied table's copy too), and,
// at each backward of the step, which micro-batches' activations it holds and which boundary buffers
// are alive. Those come from the schedule's own action lists (pipeline_schedule.h's make_schedule):
// Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM", §2.2) give GPipe's m micro-batches in flight and 1F1B's pp - stage, which the lists
// reproduce; interleaving changes which chunks' micro-batches are held, and when, in ways the lists
// carry and no closed form here needs to. Without pipeline parallelism one stage holds everything and
// one micro-batch at a time.
#pragma once
#include <vector>

#include "tools/estimate/memory_layout.h"

namespace dtrain {

// The moment a backward begins on a stage, as counts.
struct PipelineMoment {
  std::vector<int> held;    // per local chunk: micro-batches run forward whose backward (zero_bubble: I) has not run
  std::vector<int> stored;  // per local chunk, zero_bubble: micro-batches whose I has run and W has not
  int buffers = 0;          // boundary buffers alive: receives posted and not consumed, sends done
  int chunk = 0;                    // the local chunk whose backward begins
  std::vector<int> backwards_done;  // per local chunk: backwards (zero_bubble: Is) run before this one in the step
};

struct PipelineChunk {
  int first_block = 0, blocks = 0;
  bool first = false, last = false;  // the model's first chunk (the embeddings) or last (the head)
};

struct PipelineStage {
  int stage = 0, pp = 1;
  int blocks = 0;
  bool first = true, last = true;
  int in_flight = 1;      // the most (micro-batch, chunk) pairs whose activations the stage holds at once
  int micro_batches = 1;  // per step
  std::vector<PipelineChunk> chunks;    // this stage's, in order
  std::vector<PipelineMoment> moments;  // every backward of the step, in the stage's order (none without pp)
  bool pipelined() const { return pp > 1; }
  // The whole model's index of the stage's block `i` (its chunks' blocks in order).
  int model_block(int i) const;
};

// Every stage of `layout`'s pipeline, in order (one without pp).
std::vector<PipelineStage> pipeline_stages(const MemoryLayout& layout);

// The blocks of each of the model's chunks, in order: parallel.pipeline.split, or, where it is not
// given yet ("auto", timed when a run starts), the blocks spread evenly; one chunk of all without pp.
std::vector<int> chunk_blocks(const MemoryLayout& layout);

}  // namespace dtrain

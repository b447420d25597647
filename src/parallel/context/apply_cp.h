// Context parallelism (parallel.cp) as one transformation of a model over the mesh's cp dim: every
// sequence is cut into parts, one per cp rank, and every layer computes on this rank's part alone.
// - The model takes whole sequences and keeps this rank's tokens (model set_sequence_shard): the
//   embeddings, learned positions and RoPE read the tokens' global positions;
// - norms, MLPs and residuals are per token and need nothing more;
// - attention is the one layer that mixes tokens: ring attention passes key/value chunks round the
//   cp ranks (parallel/context/ring_attention.h), on the zigzag layout that gives every rank the
//   same causal work; Ulysses trades sequence shards for head shards with all-to-alls
//   (parallel/context/ulysses_attention.h), on contiguous parts;
// - the loss reads this rank's targets; its mean over a rank's tokens, averaged over cp with the
//   gradients (over dp x cp, the "dp_cp" group), is the mean over every token of the batch, since
//   every rank holds as many tokens.
// Parameters are replicated over cp, so nothing of the saved state changes with it.
#pragma once
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "model/loss.h"
#include "model/transformer.h"
#include "parallel/context/context_options.h"

namespace dtrain {

struct ContextParallelPlan {
  LossFunction loss;  // `loss` on this rank's targets; empty with cp 1
  std::vector<std::string> setup_lines;
};

// Applies context parallelism over mesh.group("cp") to `model`, whose loss is `loss`. With a cp
// group of one rank it changes nothing. Throws std::invalid_argument when the sequence or the heads
// do not split as options.impl needs.
ContextParallelPlan apply_cp(Transformer& model, const DeviceMesh& mesh, const ContextParallelOptions& options, LossFunction loss);

}  // namespace dtrain

// Tensor parallelism (parallel.tp) and sequence parallelism (parallel.sequence_parallel) as one
// transformation of a model over the mesh's tp dim, Megatron-LM's layout:
// - attention splits by heads: q, k and v are column-parallel (each rank n_head/tp query heads and
//   the key/value heads they read; when tp exceeds n_kv_head every rank keeps the key/value weights
//   whole and computes the one head its queries read), o_proj row-parallel;
// - the MLP splits its features: gate and up column-parallel, down row-parallel;
// - the token embedding and an untied head split the vocabulary (parallel/tensor/vocab_range.h) and
//   the loss is the vocab-parallel cross-entropy; a tied head uses the embedding's slice;
// - norms and GPT-2's position embedding are replicated, and so are a vision-language model's vision
//   encoder and connector: every tp rank computes the same image tokens, and their gradients, from
//   the whole gradient of the embeddings' output, are the same on every tp rank.
// So each sub-layer costs one all-reduce in forward (the row-parallel output) and one in backward
// (the column-parallel input's gradient). Under sequence parallelism the norms and residuals run on
// sequence shards: the embeddings' output is split, column-parallel layers all-gather their input,
// row-parallel ones reduce-scatter their output, and the replicated weights used on shards (norms,
// biases added after a reduce-scatter) have their gradients summed over tp.
//
// Every layer keeps its slice of the weights the whole model was initialised with (by name, from
// the run's seed), so any tp starts from the tp = 1 weights. The model code does not change: the
// transformation slices the parameters and sets the model's layer hooks (model/layer_hooks.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "model/loss.h"
#include "model/transformer.h"
#include "parallel/placement.h"

namespace dtrain {

struct TensorParallelPlan {
  ModelPlacements placements;  // the parameters cut over tp: ("tp", Shard(dim)); the rest are replicated
  LossFunction loss;           // the vocab-parallel cross-entropy; empty with tp 1
  std::vector<std::string> setup_lines;
};

// Applies tensor (and with options.sequence_parallel, sequence) parallelism over mesh.group("tp") to
// `model`, which holds whole layers. With a tp group of one rank it changes nothing. Throws
// std::invalid_argument when tp does not divide n_head, the MLP's features or the key/value heads
// (nor they it).
struct TensorParallelOptions {
  bool sequence_parallel = false;
  bool overlap_grad_reduce = true;  // the input gradient's reduction behind the weight-gradient GEMMs
};
TensorParallelPlan apply_tp(Transformer& model, const DeviceMesh& mesh, const TensorParallelOptions& options);

}  // namespace dtrain

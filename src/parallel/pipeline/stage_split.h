// How a model's blocks are cut into a pipeline's chunks: C = pp × virtual_stages runs of consecutive
// blocks, each holding at least one, chunk 0 with the embedding and chunk C-1 with the final norm,
// head and loss. The cut balances the chunks' costs (the slowest stage sets the pipeline's pace):
// costs come from an analytic count of FLOPs, or from a short timed probe of the model's parts.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/mixed_precision.h"
#include "model/transformer.h"
#include "model/transformer_config.h"

namespace dtrain {

// One micro-batch's forward and backward through each part of the model, in any common unit:
// FLOPs (model_layer_costs) or seconds (measure_layer_costs). Every block costs the same.
struct LayerCosts {
  double embedding = 0, block = 0, head = 0;  // head: the final norm, the output head and the loss
};

// FLOPs of a micro-batch of `micro_batch` sequences of model.seq_len tokens: a block's matmuls
// (GPT-2's MLP or Llama's SwiGLU, grouped-query key/value heads counted as they are) and attention,
// the head's d_model × vocab GEMMs and the cross-entropy over the vocabulary, the embedding's lookup.
// A large vocabulary makes the head worth several blocks.
LayerCosts model_layer_costs(const TransformerConfig& c, int64_t micro_batch);

// The model's parts, built once on `device`: a model holding only the embedding, one holding one
// block, and one holding only the head (model/transformer.h's TransformerParts), their matmuls in
// `mp`'s compute type as the run's are. A generator of its own makes the inputs, so timing leaves the
// global random state as the run found it.
class LayerCostProbe {
 public:
  LayerCostProbe(const TransformerConfig& c, const MixedPrecision& mp, at::Device device, uint64_t seed);
  // Seconds of one forward+backward pass of each part over a micro-batch of `micro_batch` whole
  // sequences. The first pass at a micro-batch allocates what later ones reuse: time it as warm-up.
  LayerCosts time(int64_t micro_batch);

 private:
  struct Inputs {
    at::Tensor tokens, hidden, upstream;
  };
  const Inputs& inputs(int64_t micro_batch);
  TransformerConfig c_;
  at::Device device_;
  at::Generator generator_;
  Transformer embedding_, block_, head_;
  std::map<int64_t, Inputs> inputs_;
};

// Part by part, the smaller of two timings.
LayerCosts fastest(const LayerCosts& a, const LayerCosts& b);

// Seconds: the probe's parts after one warm-up pass, the fastest of three passes of a micro-batch
// shaped as the run's. For the demo model on a CPU it takes well under a second; it is for
// parallel.pipeline.split "auto", once at start-up.
LayerCosts measure_layer_costs(const TransformerConfig& c, int64_t micro_batch, const MixedPrecision& mp, at::Device device,
                               uint64_t seed);

// Blocks per chunk for `chunks` chunks of `n_layer` blocks: each ≥ 1, chunk 0 carrying the embedding's
// cost and the last chunk the head's, with the largest chunk cost as small as it can be; among the
// splits that reach it, the one whose costs are closest to equal (least sum of squares). Throws
// std::invalid_argument when chunks < 1 or chunks > n_layer.
std::vector<int> balance_split(const LayerCosts& costs, int n_layer, int chunks);

// Each chunk's cost under `split` (blocks per chunk).
std::vector<double> chunk_costs(const LayerCosts& costs, const std::vector<int>& split);

// Checks an explicit split (parallel.pipeline.split): pp × virtual_stages entries, each ≥ 1, summing
// to n_layer. Throws std::invalid_argument naming parallel.pipeline.split and what is wrong.
void check_split(const std::vector<int>& split, int pp, int virtual_stages, int n_layer);

// One line for the run's log: "pipeline split (cost model): chunks of 3, 4, 4, 1 blocks; costs
// 0.26, 0.25, 0.25, 0.24 of the total". `source` says where the split came from.
std::string describe_split(const std::vector<int>& split, const LayerCosts& costs, const std::string& source);

}  // namespace dtrain

// What parallel.tp and parallel.sequence_parallel ask of the model and of the machines, checked
// before any work starts: tensor parallelism splits attention heads, the MLP width and the
// vocabulary over the tp ranks, and sequence parallelism the sequence, so each must split evenly
// (the vocabulary unevenly, but with rows on every rank). A tp group that spans nodes works, over
// the slow link: a warning, not an error.
#pragma once
#include "train/train_config.h"

namespace dtrain {

// Throws ConfigError, naming the keys and their values, when:
// - parallel.sequence_parallel is true and parallel.tp is 1;
// - parallel.tp does not divide model.n_head, or the MLP width (model.d_ff, or the width it defaults to);
// - under grouped-query attention, neither of parallel.tp and model.n_kv_head divides the other
//   (tp > n_kv_head replicates each key/value head over tp / n_kv_head ranks);
// - the vocabulary, split over the tp ranks as torch.chunk splits it (parallel/tensor/vocab_range.h),
//   leaves a rank no rows: tp larger than model.vocab_size, or 5 rows over 4 ranks;
// - under sequence parallelism, parallel.tp does not divide model.seq_len.
void check_tensor_parallel(const TrainConfig& config);

// Adds a warning to config.warnings when a tp group spans nodes, `node_ranks` being the ranks of a
// node: the ranks of a tp group are adjacent, so one spans nodes unless parallel.tp divides them.
void warn_if_tp_spans_nodes(TrainConfig& config, int node_ranks);

}  // namespace dtrain

// What parallel.cp and parallel.context.impl ask of the model, checked before any work starts:
// context parallelism cuts every sequence into equal chunks over the cp ranks (two per rank for
// ring attention's zigzag), and Ulysses deals each rank's attention heads out over them.
#pragma once
#include "train/train_config.h"

namespace dtrain {

// Throws ConfigError, naming the keys and their values, when:
// - ring attention: 2 x parallel.cp does not divide model.seq_len (the zigzag layout's chunks);
// - Ulysses: parallel.cp does not divide model.seq_len, or the query or key/value heads a tp rank
//   computes (model.n_head / parallel.tp; model.n_kv_head / parallel.tp, at least one);
// - sequence parallelism: parallel.tp does not divide a cp rank's part of the sequence.
void check_context_parallel(const TrainConfig& config);

}  // namespace dtrain

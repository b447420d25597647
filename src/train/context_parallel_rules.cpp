#include "train/context_parallel_rules.h"

#include <algorithm>
#include <string>

#include "train/config_reader.h"

namespace dtrain {

void check_context_parallel(const TrainConfig& c) {
  const int cp = c.parallel.cp, tp = c.parallel.tp;
  if (cp == 1) return;
  const TransformerConfig& m = c.model;
  const std::string key = "'parallel.cp' (" + std::to_string(cp) + ")";
  if (c.context.impl == ContextImpl::Ring) {
    if (m.seq_len % (2 * cp) != 0)
      fail(c.origin, "model.seq_len (" + std::to_string(m.seq_len) + ") is not divisible by 2 x " + key +
                         ": ring attention cuts each sequence into 2 x cp chunks and gives cp rank r chunks r and 2cp-1-r, so that "
                         "causal attention costs every rank the same");
  } else {
    if (m.seq_len % cp != 0)
      fail(c.origin, key + " does not divide model.seq_len (" + std::to_string(m.seq_len) + "): Ulysses gives each cp rank an equal part of the sequence");
    const std::string per_tp = tp > 1 ? " / parallel.tp (" + std::to_string(tp) + ")" : "";
    if ((m.n_head / tp) % cp != 0)
      fail(c.origin, key + " does not divide the query heads of a rank, model.n_head (" + std::to_string(m.n_head) + ")" + per_tp +
                         ": Ulysses deals the heads out over the cp ranks; use parallel.context.impl \"ring\", which takes any head count");
    const int kv = std::max(m.kv_heads() / tp, 1);
    if (kv % cp != 0)
      fail(c.origin, key + " does not divide the key/value heads of a rank, model.n_kv_head (" + std::to_string(m.kv_heads()) + ")" + per_tp +
                         (kv == 1 && m.kv_heads() < tp ? " (one, shared by several tp ranks)" : "") +
                         ": Ulysses deals the heads out over the cp ranks; use parallel.context.impl \"ring\", which takes any head count");
  }
  if (c.sequence_parallel && (m.seq_len / cp) % tp != 0)
    fail(c.origin, "'parallel.tp' (" + std::to_string(tp) + ") does not divide a cp rank's part of the sequence, model.seq_len (" + std::to_string(m.seq_len) +
                       ") / " + key + ", which parallel.sequence_parallel splits over the tp ranks");
}

}  // namespace dtrain

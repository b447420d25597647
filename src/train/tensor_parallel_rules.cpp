#include "train/tensor_parallel_rules.h"

#include <stdexcept>
#include <string>

#include "parallel/tensor/vocab_range.h"
#include "train/config_reader.h"

namespace dtrain {

namespace {

std::string number(int64_t n) { return std::to_string(n); }

// "model.d_ff (1000)", or where it is not given, the width it defaults to and why.
std::string mlp_width_words(const TransformerConfig& m) {
  if (m.d_ff > 0) return "model.d_ff (" + number(m.d_ff) + ")";
  return "the MLP width " + number(m.ff_dim()) + " (model.d_ff is not given: " +
         (m.is_llama() ? "8/3 x model.d_model " + number(m.d_model) + ", rounded up to a multiple of 64)"
                       : "4 x model.d_model " + number(m.d_model) + ")");
}

}  // namespace

void check_tensor_parallel(const TrainConfig& c) {
  const int tp = c.parallel.tp;
  const TransformerConfig& m = c.model;
  const std::string key = "'parallel.tp' (" + number(tp) + ")";
  if (c.sequence_parallel && tp == 1)
    fail(c.origin, "'parallel.sequence_parallel' is true, but 'parallel.tp' is 1: sequence parallelism splits the sequence over "
                   "the tp ranks, so it needs parallel.tp of 2 or more");
  if (tp == 1) return;
  if (m.n_head % tp != 0)
    fail(c.origin, key + " does not divide model.n_head (" + number(m.n_head) +
                       "): tensor parallelism gives each tp rank the same number of whole attention heads");
  const int kv = m.kv_heads();
  if (kv % tp != 0 && tp % kv != 0)
    fail(c.origin, key + " and model.n_kv_head (" + number(kv) + ") must divide one another: each tp rank holds n_kv_head / tp "
                       "key/value heads, or, where tp is the larger, one key/value head that tp / n_kv_head ranks share");
  if (m.ff_dim() % tp != 0)
    fail(c.origin, key + " does not divide " + mlp_width_words(m) + ": tensor parallelism gives each tp rank the same share of the MLP's columns");
  try {
    vocab_range(m.vocab_size, tp, 0);  // refuses a split that leaves any rank no rows, whichever rank asks
  } catch (const std::invalid_argument& e) {
    fail(c.origin, key + " does not fit model.vocab_size (" + number(m.vocab_size) + "): " + e.what());
  }
  if (c.sequence_parallel && m.seq_len % tp != 0)
    fail(c.origin, key + " does not divide model.seq_len (" + number(m.seq_len) +
                       "), which parallel.sequence_parallel splits over the tp ranks");
}

void warn_if_tp_spans_nodes(TrainConfig& c, int node_ranks) {
  const int tp = c.parallel.tp;
  if (tp == 1 || node_ranks < 1 || node_ranks % tp == 0) return;
  c.warnings.push_back(c.origin + ": parallel.tp (" + number(tp) + ") does not divide a node's " + number(node_ranks) +
                       " ranks, so tp groups span nodes: their collectives, several per layer in forward and in backward, "
                       "cross the link between nodes; a parallel.tp that divides a node's ranks keeps every tp group on one node");
}

}  // namespace dtrain

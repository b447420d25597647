// A projected training step time for one layout, from FLOPs, message sizes and link speeds: the cost
// model `dtrain estimate --plan` ranks layouts by. Pure: the same layout the memory estimate reads
// (tools/estimate/memory_layout.h), the compute rate and the links in, seconds per term out. Each
// term in step_cost.cpp names where its formula comes from. The model is for ranking layouts
// against each other, not for predicting a run to the percent: no communication overlaps compute
// (every term adds), collectives run as rings at one bus bandwidth per link, and the elementwise
// work is inside the compute rate; the optimizer's update is a term of its own where it was timed
// (ZeRO shards it), else inside the compute efficiency too.
#pragma once
#include <string>
#include <vector>

#include "tools/estimate/memory_layout.h"

namespace dtrain {

// A link between ranks as a collective sees it: bus bandwidth (nccl-tests' busbw, bytes/s) and the
// time one ring step waits before any byte moves.
struct Link {
  double bus_bytes_per_s = 0;
  double latency_s = 0;
};

struct Links {
  Link intra_node, inter_node;
};

// Where the layout runs and how fast it computes.
struct CostTarget {
  int world_size = 1, nodes = 1;
  double flops_rate = 0;  // FLOP/s one rank's compute sustains in this layout (peak × efficiency)
  // The optimizer's update of one parameter, timed (compute_probes.h); 0: inside the efficiency.
  double update_s_per_parameter = 0;
  Links links;
  int ranks_per_node() const { return world_size / nodes; }
};

struct CostTerm {
  std::string name;     // "tp all-reduces of activations"
  double seconds = 0;
  std::string formula;  // "m·(4L+2) × AR(T·d·e) over 2 ranks, intra-node"
};

struct StepCost {
  std::vector<CostTerm> terms;  // they add up to step_s
  double step_s = 0;
  double tokens_per_step = 0;   // all ranks together
  double model_flops_per_step = 0;  // without recomputation: what MFU counts
  double tokens_per_s() const { return tokens_per_step / step_s; }
  // Model FLOPs per second over the world's peak: `peak_flops` per rank, `world_size` ranks.
  double mfu(double peak_flops, int world_size) const;
  double seconds(const std::string& name) const;  // a term's, 0 when absent
};

// Training FLOPs per token with the recomputation activation checkpointing adds: the model's
// 6·Ψ + 12·L·s·d (TransformerConfig::train_flops_per_token), plus under full checkpointing the
// blocks' forward again (2·Ψ_blocks + 4·L·s·d) and under selective the attention core's forward
// (4·L·s·d); every:N recomputes one block in N.
double flops_per_token(const TransformerConfig& model, const ActivationCheckpointing& checkpointing);

// The time of a ring collective of `bytes` (each rank's whole buffer) over `ranks` on `link`, the
// α-β model with nccl-tests' bus factors: all-reduce 2(n-1)/n·S/busbw + 2(n-1)·α; all-gather and
// reduce-scatter (n-1)/n·S/busbw + (n-1)·α. 0 for one rank.
double all_reduce_s(double bytes, int ranks, const Link& link);
double all_gather_s(double bytes, int ranks, const Link& link);
// One point-to-point message: α + S/busbw.
double send_s(double bytes, const Link& link);

// Whether the group of mesh dim `dim` ("tp", "cp", "dp", "pp") spans nodes: the mesh orders dims
// pp, dp, cp, tp from outermost (parallel/parallel_dims.h), so a dim's group spans the product of its
// size and the sizes inside it; more than a node's ranks cross the inter-node link.
bool crosses_nodes(const MemoryLayout& layout, const std::string& dim, int ranks_per_node);

StepCost project_step(const MemoryLayout& layout, const CostTarget& target);

}  // namespace dtrain

#include "tools/plan/step_cost.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/number_text.h"
#include "parallel/pipeline/pipeline_simulator.h"
#include "tools/estimate/model_states.h"
#include "tools/estimate/pipeline_stage.h"

namespace dtrain {

namespace {

// Gradients are reduced in fp32 whatever the compute type (parallel/ddp, parallel/zero): the
// 16-bit wire type, data_types.grad_accum_dtype, is one the memory estimate refuses, so no planned
// layout has it.
constexpr double kGradientBytes = 4;

std::string where(bool inter) { return inter ? "inter-node" : "intra-node"; }

// What one rank of the most loaded pipeline stage holds: its blocks and parameters (one tp slice).
struct StageShare {
  int blocks = 0;
  int recomputed_blocks = 0;  // of them, recomputed whole under activation checkpointing
  double parameters = 0;
};

StageShare largest_stage(const MemoryLayout& l) {
  const ParameterCounts whole = parameter_counts(l.model, l.tp);
  StageShare out;
  for (const PipelineStage& stage : pipeline_stages(l)) {
    const ParameterCounts counts = stage_parameter_counts(whole, l.model, stage);
    if (double(counts.total) <= out.parameters) continue;
    out.parameters = double(counts.total);
    out.blocks = stage.blocks;
    out.recomputed_blocks = 0;
    for (const PipelineChunk& c : stage.chunks) out.recomputed_blocks += l.activation_checkpointing.whole_blocks(c.first_block, c.first_block + c.blocks);
  }
  return out;
}

}  // namespace

double flops_per_token(const TransformerConfig& model, const ActivationCheckpointing& checkpointing) {
  // PaLM's accounting (Chowdhery et al. 2022, appendix B): 6 FLOPs per parameter per token for the
  // matmuls' forward (2) and backward (4), and 12·L·s·d for attention's scores and weighted sum;
  // the forward is a third of each.
  const double base = model.train_flops_per_token();
  const double attention_forward = 4.0 * model.seq_len * model.d_model;  // per block
  const double block_forward = 2.0 * double(parameter_counts(model, 1).block) + attention_forward;
  switch (checkpointing.mode) {
    case ActivationCheckpointing::Mode::None: return base;
    // Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", §5):
    // full recomputation reruns every block's forward in backward, so a step costs 4/3 of 6Ψ for the
    // blocks; selective reruns only attention's core (QKᵀ, softmax, ·V), whose forward is 4·s·d per token.
    case ActivationCheckpointing::Mode::Full:
    case ActivationCheckpointing::Mode::Every:
      return base + checkpointing.whole_blocks(0, model.n_layer) * block_forward;
    case ActivationCheckpointing::Mode::Selective: return base + model.n_layer * attention_forward;
  }
  return base;
}

double all_reduce_s(double bytes, int ranks, const Link& link) {
  if (ranks <= 1) return 0;
  // nccl-tests' PERFORMANCE.md: a ring all-reduce moves 2(n-1)/n of the buffer over each rank's
  // link in 2(n-1) steps; busbw is defined so that time = 2(n-1)/n · S / busbw.
  return 2.0 * (ranks - 1) / ranks * bytes / link.bus_bytes_per_s + 2.0 * (ranks - 1) * link.latency_s;
}

double all_gather_s(double bytes, int ranks, const Link& link) {
  if (ranks <= 1) return 0;
  // The same source: all-gather and reduce-scatter move (n-1)/n of the whole buffer in n-1 steps.
  return double(ranks - 1) / ranks * bytes / link.bus_bytes_per_s + double(ranks - 1) * link.latency_s;
}

double send_s(double bytes, const Link& link) { return link.latency_s + bytes / link.bus_bytes_per_s; }

bool crosses_nodes(const MemoryLayout& l, const std::string& dim, int ranks_per_node) {
  int size = 0, span = 0;
  if (dim == "tp") size = l.tp, span = l.tp;
  else if (dim == "cp") size = l.cp, span = l.cp * l.tp;
  else if (dim == "dp") size = l.dp * l.cp, span = l.dp * l.cp * l.tp;  // gradients are reduced over dp × cp
  else if (dim == "pp") size = l.pp, span = l.pp * l.dp * l.cp * l.tp;
  else throw std::invalid_argument("crosses_nodes: unknown mesh dim '" + dim + "'");
  return size > 1 && span > ranks_per_node;
}

double StepCost::mfu(double peak_flops, int world_size) const {
  return model_flops_per_step / step_s / (double(world_size) * peak_flops);
}

double StepCost::seconds(const std::string& name) const {
  for (const CostTerm& t : terms)
    if (t.name == name) return t.seconds;
  return 0;
}

StepCost project_step(const MemoryLayout& l, const CostTarget& target) {
  if (target.flops_rate <= 0) throw std::invalid_argument("project_step: a compute rate above 0 is needed");
  StepCost out;
  const int rpn = target.ranks_per_node();
  const Link& intra = target.links.intra_node;
  const Link& inter = target.links.inter_node;
  auto link_of = [&](const std::string& dim) -> const Link& { return crosses_nodes(l, dim, rpn) ? inter : intra; };
  const double m = double(l.accumulation);                                   // micro-batches per step
  const double sequence_tokens = double(l.micro_batch) * l.model.seq_len;    // one dp rank's micro-batch
  const double tokens = sequence_tokens / l.cp;                              // what one rank computes of it: T
  const double activation_bytes = tokens * l.model.d_model * l.compute_bytes;  // one [T, d] tensor: T·d·e
  const StageShare stage = largest_stage(l);

  // Compute: every rank does 1/world of the step's FLOPs (tp, pp and cp split a replica's work
  // evenly; the first and last stage's embeddings and head are not counted apart).
  out.tokens_per_step = sequence_tokens * m * l.dp;
  out.model_flops_per_step = out.tokens_per_step * l.model.train_flops_per_token();
  const double per_token = flops_per_token(l.model, l.activation_checkpointing);
  const double compute_s = out.tokens_per_step * per_token / target.world_size / target.flops_rate;
  out.terms.push_back({"compute", compute_s,
                       "tokens × " + fixed(per_token / 1e6, 3) + " MFLOP/token / " + std::to_string(target.world_size) + " ranks / " +
                           fixed(target.flops_rate / 1e9, 1) + " GFLOP/s"});

  // Pipeline: the schedule's own action lists timed by the simulator (parallel/pipeline), with a
  // micro-batch's forward a third of its model FLOPs, its backward the rest with the recomputation,
  // and each boundary send (an activation forward, its gradient back: T·d·e each) between them.
  if (l.pp > 1) {
    const double per_micro_batch = compute_s / m;
    PipelineCosts costs;
    costs.forward = per_micro_batch * l.model.train_flops_per_token() / (3 * per_token);
    costs.backward = per_micro_batch - costs.forward;
    costs.weight = costs.backward / 2;
    costs.comm = send_s(activation_bytes, link_of("pp"));
    const PipelineTimeline timeline = simulate_pipeline(make_schedule(l.schedule, l.pp, l.virtual_stages, int(l.accumulation)), costs);
    out.terms.push_back({"pipeline bubble and boundary sends", std::max(0.0, timeline.makespan - compute_s),
                         "simulated " + schedule_name(l.schedule) + " over pp " + std::to_string(l.pp) + ", " + std::to_string(l.accumulation) +
                             " micro-batches, sends of T·d·e " + where(crosses_nodes(l, "pp", rpn))});
  }

  // Data parallelism: the gradients of the rank's parameters (Ψ_r, one tp slice of its stage) over
  // the dp × cp ranks that hold the same ones, in buckets of reduce_bucket_size. The ZeRO paper
  // (Rajbhandari et al. 2020, §7) counts 2Ψ for DDP and stages 1-2, 3Ψ for stage 3; what dtrain's
  // stages send (docs/training.md, "ZeRO"): stage 1 all-reduces as DDP and all-gathers the updated
  // parameters; stage 2 reduce-scatters every micro-batch (once per step under pp) and all-gathers
  // after the update; stage 3 gathers each unit before its forward and again before its backward
  // (reshard_after_forward) and reduce-scatters its gradients, every micro-batch.
  const int dp_ranks = l.dp * l.cp;
  if (dp_ranks > 1) {
    const Link& link = link_of("dp");
    const double gradients = kGradientBytes * stage.parameters;
    const double buckets = std::max(1.0, std::ceil(stage.parameters / double(l.reduce_bucket_elements)));
    const double units = stage.blocks + 2.0;  // ZeRO-3's units: each block, the embeddings, the head
    const std::string over = " over " + std::to_string(dp_ranks) + " ranks, " + where(crosses_nodes(l, "dp", rpn));
    double seconds = 0;
    std::string formula;
    if (l.zero_stage == 0) {
      seconds = buckets * all_reduce_s(gradients / buckets, dp_ranks, link);
      formula = "AR(4Ψ_r)";
    } else if (l.zero_stage == 1) {
      seconds = buckets * (all_reduce_s(gradients / buckets, dp_ranks, link) + all_gather_s(gradients / buckets, dp_ranks, link));
      formula = "AR(4Ψ_r) + AG(4Ψ_r)";
    } else if (l.zero_stage == 2) {
      const double reductions = l.pp > 1 ? 1 : m;
      seconds = buckets * (reductions + 1) * all_gather_s(gradients / buckets, dp_ranks, link);
      formula = (l.pp > 1 ? "RS(4Ψ_r)" : "m·RS(4Ψ_r)") + std::string(" + AG(4Ψ_r)");
    } else {
      const double gathered = (l.gather_16bit ? 2.0 : 4.0) * stage.parameters;
      const double gathers = l.reshard_after_forward ? 2 : 1;
      seconds = m * units * (gathers * all_gather_s(gathered / units, dp_ranks, link) + all_gather_s(gradients / units, dp_ranks, link));
      formula = "m·(" + std::string(l.reshard_after_forward ? "2" : "1") + "·AG(" + (l.gather_16bit ? "2" : "4") + "Ψ_r) + RS(4Ψ_r))";
    }
    out.terms.push_back({"data-parallel gradients and parameters", seconds,
                         formula + ", Ψ_r = " + std::to_string(int64_t(stage.parameters)) + over});
  }

  // Tensor parallelism (Shoeybi et al. 2019, Megatron-LM §3): each block all-reduces one [T, d]
  // activation after attention and after the MLP in forward, and their input gradients in backward;
  // the vocab-parallel embedding adds one each way; a block recomputed whole repeats its forward's
  // two. Sequence parallelism turns each all-reduce into an all-gather and a reduce-scatter
  // (Korthikanti et al. 2022, §4.2.2), the same bytes and ring steps, so it costs the same here.
  if (l.tp > 1) {
    const double per_micro_batch = 4.0 * stage.blocks + 2 + 2.0 * stage.recomputed_blocks;
    out.terms.push_back({"tensor-parallel activations", m * per_micro_batch * all_reduce_s(activation_bytes, l.tp, link_of("tp")),
                         "m·" + fixed(per_micro_batch, 0) + "·AR(T·d·e) over " + std::to_string(l.tp) + " ranks, " +
                             where(crosses_nodes(l, "tp", rpn))});
  }

  // Context parallelism as ring attention (Liu et al. 2023): in each block's forward every rank
  // passes its keys and values (T·2·kv·e) on cp-1 times; backward passes them again with their
  // gradients (twice the bytes); a block recomputed whole repeats the forward's.
  if (l.cp > 1) {
    const int t = l.tp, kv_heads = l.model.kv_heads();
    const double kv = kv_heads % t == 0 ? double(kv_heads) / t * l.model.head_dim() : double(l.model.head_dim());
    const double kv_bytes = tokens * 2 * kv * l.compute_bytes;
    const Link& link = link_of("cp");
    const double per_block = (l.cp - 1) * (send_s(kv_bytes, link) + send_s(2 * kv_bytes, link));
    const double recomputed = (l.cp - 1) * send_s(kv_bytes, link);
    out.terms.push_back({"context-parallel ring", m * (stage.blocks * per_block + stage.recomputed_blocks * recomputed),
                         "m·L·(cp-1)·(send(T·2kv·e) + send(2·T·2kv·e)) over " + std::to_string(l.cp) + " ranks, " +
                             where(crosses_nodes(l, "cp", rpn))});
  }

  // The optimizer's update, once a step, of what the rank's optimizer holds: its parameters, or
  // under ZeRO (every stage shards the optimizer state, Rajbhandari et al. 2020) their 1/(dp·cp).
  if (target.update_s_per_parameter > 0) {
    const double updated = l.zero_stage > 0 ? stage.parameters / dp_ranks : stage.parameters;
    out.terms.push_back({"optimizer update", updated * target.update_s_per_parameter,
                         std::string(l.zero_stage > 0 ? "Ψ_r / " + std::to_string(dp_ranks) : "Ψ_r") + " × " +
                             fixed(1e9 * target.update_s_per_parameter, 3) + " ns a parameter"});
  }

  for (const CostTerm& t : out.terms) out.step_s += t.seconds;
  return out;
}

}  // namespace dtrain

#include "train/parallel_plan_summary.h"

#include "common/number_text.h"
#include "model/parameter_shapes.h"

namespace dtrain {

std::vector<std::string> describe_parallel_plan(const ParallelPlan& plan, const TrainConfig& c, const PlanFacts& facts) {
  std::vector<std::string> lines;
  lines.push_back("model: " + c.model.describe() + " on " + facts.device.str() + ", activation checkpointing " +
                  c.activation_checkpointing.describe() + ", precision " + facts.precision.describe());
  if (const auto& scaler = plan.scaler)
    lines.push_back(scaler->dynamic() ? "fp16 loss scale: dynamic, from " + plain(scaler->scale()) + " (window " +
                                            std::to_string(c.loss_scaler.window) + ", hysteresis " +
                                            std::to_string(c.loss_scaler.hysteresis) + ", minimum " + plain(c.loss_scaler.min_scale) + ")"
                                      : "fp16 loss scale: static " + plain(scaler->scale()));
  const auto& grad_sync = *plan.grad_sync;
  lines.push_back("data parallel: " + std::to_string(c.dp) + " rank(s); " + std::to_string(plan.flat->numel()) +
                  " trainable parameters in " + std::to_string(grad_sync.buckets().size()) + " gradient bucket(s)" +
                  (plan.frozen.empty() ? ""
                                       : "; " + std::to_string(plan.frozen_numel) + " frozen parameters in " +
                                             std::to_string(plan.frozen.size()) + " tensors, not communicated"));
  // The whole model's parameters (every pipeline stage's), and what each parallel.modules glob gave its own.
  const auto frozen = [&c](const std::string& name) { return c.freezes(name); };
  for (auto& line : describe_module_plan(c.modules, parameter_shapes(c.model), frozen, facts.shard_group_size))
    lines.push_back(std::move(line));
  if (c.zero_stage >= 1) {
    const std::string what = c.zero_stage == 3   ? "parameters, gradients and optimizer state"
                             : c.zero_stage == 2 ? "optimizer state and gradients"
                                                 : "optimizer state";
    std::string line = "ZeRO stage " + std::to_string(c.zero_stage) + ": " + what + " sharded over " +
                       std::to_string(facts.shard_group_size) + " rank(s)" +
                       (plan.mesh->size("dp_replicate") > 1
                            ? " and replicated over " + std::to_string(plan.mesh->size("dp_replicate")) + " such groups (hybrid)"
                            : "") +
                       ", this rank owns " + std::to_string(facts.owned_numel) + " of " + std::to_string(plan.flat->numel()) +
                       " parameters";
    int64_t whole = 0;
    for (const Span& s : plan.kept_whole) whole += s.numel;
    if (whole > 0) line += " (" + std::to_string(whole) + " of them kept whole on every rank by parallel.modules)";
    if (plan.sharded)
      line += "; " + std::to_string(grad_sync.buckets().size()) +
              (plan.pipeline
                   ? " units gathered once per step and held through the "
                     "pipeline's micro-batches"
                   : std::string(" units gathered one at a time with the next "
                                 "prefetched, ") +
                         (c.reshard_after_forward ? "blocks freed between forward and backward" : "kept whole from forward to backward")) +
              (!facts.precision.enabled() ? ""
               : c.gather_16bit           ? "; every unit with matmul weights gathered in " + precision_name(c.precision)
                                : "; matmul weights gathered in " + precision_name(c.precision) + ", norms, biases and embeddings in fp32");
    lines.push_back(line);
  }
  // What stays in the memory the run computes in: an offloaded shard is in a
  // file or in host memory.
  const auto& sharded = plan.sharded;
  const bool shard_offloaded = sharded && (sharded->shard_in_file() || sharded->shard().device() != facts.device);
  const int64_t param_bytes = sharded ? (shard_offloaded ? 0 : sharded->shard().nbytes()) : plan.flat->data().nbytes(),
                grad_bytes = plan.grad_sync->grads().nbytes(), optimizer_bytes = plan.optimizer->resident_bytes();
  lines.push_back("model states on this rank: parameters " + mib(param_bytes) + " MiB, gradients " + mib(grad_bytes) + " MiB, optimizer " +
                  mib(optimizer_bytes) + " MiB (" + mib(param_bytes + grad_bytes + optimizer_bytes) + " MiB)");
  lines.push_back("batch: " + std::to_string(c.global_batch) + " = micro " + std::to_string(c.micro_batch) + " x accumulation " +
                  std::to_string(c.accumulation) + " x dp " + std::to_string(c.dp) + " (" +
                  std::to_string(c.global_batch * c.model.seq_len) + " tokens per step)");
  return lines;
}

}  // namespace dtrain

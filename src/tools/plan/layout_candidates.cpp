#include "tools/plan/layout_candidates.h"

namespace dtrain {

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

std::string on_off(bool on) { return on ? "true" : "false"; }

}  // namespace

std::vector<std::string> LayoutChoice::sets() const {
  return {"parallel.dp=" + std::to_string(dp),
          "parallel.tp=" + std::to_string(tp),
          "parallel.pp=" + std::to_string(pp),
          "parallel.cp=" + std::to_string(cp),
          "parallel.sequence_parallel=" + on_off(sequence_parallel),
          "zero_optimization.stage=" + std::to_string(zero_stage),
          "zero_optimization.offload_optimizer.device=" + std::string(offload_optimizer ? "cpu" : "none"),
          "train.activation_checkpointing=" + checkpointing,
          "train_batch_size=" + std::to_string(global_batch),
          "train_micro_batch_size_per_gpu=" + std::to_string(micro_batch),
          "gradient_accumulation_steps=" + std::to_string(accumulation),
          "parallel.micro_batches=" + std::to_string(accumulation)};
}

std::string LayoutChoice::describe() const {
  std::string s = "dp " + std::to_string(dp);
  if (tp > 1) s += ", tp " + std::to_string(tp) + (sequence_parallel ? " + SP" : "");
  if (pp > 1) s += ", pp " + std::to_string(pp);
  if (cp > 1) s += ", cp " + std::to_string(cp);
  s += zero_stage > 0 ? ", ZeRO-" + std::to_string(zero_stage) : ", DDP";
  if (offload_optimizer) s += " (optimizer offloaded)";
  s += ", AC " + checkpointing + ", micro-batch " + std::to_string(micro_batch) + " x " + std::to_string(accumulation);
  return s;
}

std::vector<LayoutChoice> enumerate_layouts(const CandidateOptions& o) {
  std::vector<LayoutChoice> out;
  for (int tp : divisors(o.world_size))
    for (int pp : divisors(o.world_size / tp))
      for (int cp : divisors(o.world_size / tp / pp)) {
        const int dp = o.world_size / tp / pp / cp;
        if (o.global_batch % dp != 0) continue;  // no whole micro-batches per dp rank
        const int64_t per_rank = o.global_batch / dp;
        for (bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
          for (int stage = 0; stage <= (dp * cp > 1 ? 3 : 0); ++stage)  // ZeRO shards over dp × cp: one rank, nothing to shard
            for (bool offload : stage > 0 && o.offload ? std::vector<bool>{false, true} : std::vector<bool>{false})
              for (const char* ac : {"none", "full", "selective"})
                for (int64_t micro = 1; micro <= per_rank && (o.max_micro_batch <= 0 || micro <= o.max_micro_batch); micro *= 2) {
                  if (per_rank % micro != 0) continue;
                  LayoutChoice c;
                  c.dp = dp, c.tp = tp, c.pp = pp, c.cp = cp, c.sequence_parallel = sp;
                  c.zero_stage = stage, c.offload_optimizer = offload, c.checkpointing = ac;
                  c.global_batch = o.global_batch, c.micro_batch = micro, c.accumulation = per_rank / micro;
                  out.push_back(c);
                }
      }
  return out;
}

}  // namespace dtrain

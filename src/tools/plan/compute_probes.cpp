#include "tools/plan/compute_probes.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "common/elapsed.h"
#include "common/number_text.h"
#include "optim/fused_adamw.h"
#include "parallel/pipeline/stage_split.h"
#include "train/matmul_peak.h"

namespace dtrain {

namespace {

// The parts' own seed: the rate does not depend on the weights' values.
constexpr uint64_t kProbeSeed = 1;
// Rounds of the model probe: enough for a fastest pass to mean something, few enough for a large
// model's passes.
constexpr int kMinRounds = 3, kMaxRounds = 20;
constexpr int kUpdatePasses = 5;

}  // namespace

double GemmPeakProbe::operator()(const MemoryLayout& l) {
  const int64_t tokens = l.micro_batch * l.model.seq_len / l.cp, ff = std::max(1, l.model.ff_dim() / l.tp);
  auto [it, fresh] = rates_.try_emplace({tokens, ff}, 0.0);
  if (fresh) it->second = measure_matmul_flops(at::kCPU, tokens, l.model.d_model, ff, seconds_, dtype_);
  return it->second;
}

std::vector<double> ModelRateProbe::operator()(const std::vector<MemoryLayout>& layouts) {
  if (layouts.empty()) return {};
  const TransformerConfig& model = layouts.front().model;
  std::map<int64_t, LayerCosts> best;
  for (const MemoryLayout& l : layouts) best.emplace(l.micro_batch, LayerCosts{});
  shapes_ = best.size();
  LayerCostProbe probe(model, mp_, at::Device(at::kCPU), kProbeSeed);
  for (auto& [micro_batch, costs] : best) probe.time(micro_batch);  // warm-up: the first pass allocates
  for (auto& [micro_batch, costs] : best) costs = probe.time(micro_batch);
  const auto start = std::chrono::steady_clock::now();
  for (int round = 1; round < kMinRounds || (round < kMaxRounds && seconds_since(start) < seconds_); ++round)
    for (auto& [micro_batch, costs] : best) costs = fastest(costs, probe.time(micro_batch));

  std::map<int64_t, double> rate;
  const int n = model.n_layer;
  for (const auto& [micro_batch, seconds] : best) {
    const LayerCosts flops = model_layer_costs(model, micro_batch);
    rate[micro_batch] = (flops.embedding + n * flops.block + flops.head) / (seconds.embedding + n * seconds.block + seconds.head);
    progress_("timed the model's parts at micro-batch " + std::to_string(micro_batch) + ": " + fixed(rate[micro_batch] / 1e9, 1) +
              " GFLOP/s");
  }
  std::vector<double> out;
  for (const MemoryLayout& l : layouts) out.push_back(rate.at(l.micro_batch));
  return out;
}

double time_update_per_parameter(int64_t elements) {
  const auto options = at::TensorOptions().dtype(at::kFloat);
  at::Tensor p = at::zeros({elements}, options), g = at::full({elements}, 1e-3, options), m = at::zeros({elements}, options),
             v = at::zeros({elements}, options);
  const AdamWStep step{-1e-5f, 0.1f, 0.999f, 0.001f, 1.0f, 1e-8f, -1e-3f, 1.0f};
  const Spans decay{{0, elements}};
  double best = std::numeric_limits<double>::infinity();
  for (int pass = 0; pass < 1 + kUpdatePasses; ++pass) {  // the first touches the pages
    const auto start = std::chrono::steady_clock::now();
    fused_adamw(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(), elements, decay, step, false);
    if (pass > 0) best = std::min(best, seconds_since(start));
  }
  return best / double(elements);
}

}  // namespace dtrain

// The planner behind `dtrain estimate --plan`: the cost model's terms against hand-computed values,
// which layouts a small world enumerates and what becomes of them, and rankings whose answer is
// clear (a memory budget only ZeRO-3 meets; an inter-node link so slow that tensor parallelism
// across nodes must rank last). Every ranking fixes the compute rate, so nothing there is timed; the
// model probe's own test times the tiny model and checks only how its rates map onto layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "support/scratch.h"
#include "tools/estimate/memory_estimate.h"
#include "tools/plan/compute_probes.h"
#include "tools/plan/layout_candidates.h"
#include "tools/plan/layout_planner.h"
#include "tools/plan/plan_hardware.h"
#include "tools/plan/step_cost.h"
#include "train/estimate_layout.h"
#include "train/train_config.h"

namespace dtrain {
namespace {

// The tiny preset: GPT-2, 2 blocks, d 32, seq 16, vocabulary 256, tied embeddings. A block holds
// 12d² + 13d parameters (two norms 4d, qkv 3d² + 3d, o d² + d, the MLP 8d² + 5d); the model adds
// the token and position tables (V·d + s·d) and the final norm (2d).
constexpr double kD = 32, kSeq = 16, kLayers = 2, kVocab = 256;
constexpr double kBlock = 12 * kD * kD + 13 * kD;
constexpr double kParameters = kLayers * kBlock + kVocab * kD + kSeq * kD + 2 * kD;

MemoryLayout tiny(int dp, int tp = 1, int pp = 1, int cp = 1) {
  MemoryLayout l;
  l.model = model_preset("tiny");
  l.dp = dp, l.dp_shard = dp * cp, l.tp = tp, l.pp = pp, l.cp = cp;
  l.micro_batch = 4;
  l.accumulation = 2;
  return l;
}

CostTarget target(int world, int nodes = 1, Link link = {1e9, 1e-5}) {
  CostTarget t;
  t.world_size = world;
  t.nodes = nodes;
  t.flops_rate = 1e9;
  t.links = {link, link};
  return t;
}

TEST(StepCost, CollectivesFollowTheRingAlphaBetaModel) {
  const Link link{10e9, 1e-5};
  EXPECT_DOUBLE_EQ(all_reduce_s(1e9, 4, link), 2.0 * 3 / 4 * 1e9 / 10e9 + 6 * 1e-5);  // 0.15 s + 6 ring steps
  EXPECT_DOUBLE_EQ(all_gather_s(1e9, 4, link), 3.0 / 4 * 1e9 / 10e9 + 3 * 1e-5);
  EXPECT_DOUBLE_EQ(send_s(1e6, link), 1e-5 + 1e-4);
  EXPECT_EQ(all_reduce_s(1e9, 1, link), 0);
}

TEST(StepCost, RecomputationAddsTheForwardItRepeats) {
  const TransformerConfig m = model_preset("tiny");
  const double base = 6 * kParameters + 12 * kLayers * kSeq * kD;  // PaLM's 6N + 12·L·s·d
  ActivationCheckpointing ac;
  EXPECT_DOUBLE_EQ(flops_per_token(m, ac), base);
  ac = ActivationCheckpointing::parse("full");
  EXPECT_DOUBLE_EQ(flops_per_token(m, ac), base + kLayers * (2 * kBlock + 4 * kSeq * kD));
  ac = ActivationCheckpointing::parse("selective");
  EXPECT_DOUBLE_EQ(flops_per_token(m, ac), base + kLayers * 4 * kSeq * kD);
  ac = ActivationCheckpointing::parse("every:2");
  EXPECT_DOUBLE_EQ(flops_per_token(m, ac), base + 1 * (2 * kBlock + 4 * kSeq * kD));
}

TEST(StepCost, DataParallelComputeAndGradients) {
  const StepCost c = project_step(tiny(2), target(2));
  const double tokens = 4 * kSeq * 2 * 2;  // micro-batch × seq × accumulation × dp
  EXPECT_DOUBLE_EQ(c.tokens_per_step, tokens);
  EXPECT_NEAR(c.seconds("compute"), tokens * (6 * kParameters + 12 * kLayers * kSeq * kD) / 2 / 1e9, 1e-12);
  // DDP: one all-reduce of the fp32 gradients, in one bucket (Ψ under reduce_bucket_size).
  EXPECT_NEAR(c.seconds("data-parallel gradients and parameters"), all_reduce_s(4 * kParameters, 2, {1e9, 1e-5}), 1e-12);
  EXPECT_NEAR(c.step_s, c.seconds("compute") + c.seconds("data-parallel gradients and parameters"), 1e-12);
  EXPECT_NEAR(c.mfu(1e9, 2), c.seconds("compute") / c.step_s, 1e-12);  // at a rate equal to the peak, MFU is compute's share

  MemoryLayout zero3 = tiny(2);
  zero3.zero_stage = 3;
  const double units = kLayers + 2;
  const Link link{1e9, 1e-5};
  EXPECT_NEAR(project_step(zero3, target(2)).seconds("data-parallel gradients and parameters"),
              2 * units * (2 * all_gather_s(4 * kParameters / units, 2, link) + all_gather_s(4 * kParameters / units, 2, link)), 1e-12);
  MemoryLayout zero2 = tiny(2);
  zero2.zero_stage = 2;  // a reduce-scatter every micro-batch, an all-gather after the update
  EXPECT_NEAR(project_step(zero2, target(2)).seconds("data-parallel gradients and parameters"), 3 * all_gather_s(4 * kParameters, 2, link), 1e-12);
}

TEST(StepCost, ATimedUpdateIsATermOfItsOwnThatZeroShards) {
  CostTarget t = target(2);
  EXPECT_EQ(project_step(tiny(2), t).seconds("optimizer update"), 0) << "untimed: inside the efficiency";
  t.update_s_per_parameter = 1e-9;
  EXPECT_NEAR(project_step(tiny(2), t).seconds("optimizer update"), kParameters * 1e-9, 1e-15);
  for (int stage : {1, 2, 3}) {
    MemoryLayout zero = tiny(2);
    zero.zero_stage = stage;
    EXPECT_NEAR(project_step(zero, t).seconds("optimizer update"), kParameters / 2 * 1e-9, 1e-15) << "stage " << stage;
  }
}

TEST(StepCost, TensorParallelAllReducesPerBlockAndMicroBatch) {
  const Link link{1e9, 1e-5};
  MemoryLayout l = tiny(1, 2);
  const double activation = 4 * kSeq * kD * 4;  // T·d·e, T = 4 sequences of 16
  EXPECT_NEAR(project_step(l, target(2)).seconds("tensor-parallel activations"), 2 * (4 * kLayers + 2) * all_reduce_s(activation, 2, link), 1e-12);
  l.activation_checkpointing = ActivationCheckpointing::parse("full");  // the recomputed forwards' two more per block
  EXPECT_NEAR(project_step(l, target(2)).seconds("tensor-parallel activations"), 2 * (6 * kLayers + 2) * all_reduce_s(activation, 2, link), 1e-12);
}

TEST(StepCost, PipelineBubbleIsOneFOneBsWithFreeSends) {
  MemoryLayout l = tiny(1, 1, 2);
  l.accumulation = 4;
  const StepCost c = project_step(l, target(2, 1, {1e30, 0}));
  // (p-1)/(m+p-1) of the makespan idles: (p-1)·(F+B) = compute × (p-1)/m on top of the compute.
  EXPECT_NEAR(c.seconds("pipeline bubble and boundary sends"), c.seconds("compute") * 1 / 4, 1e-12);
}

TEST(StepCost, GroupsCrossNodesFromTheInnermostDimOut) {
  const MemoryLayout l = tiny(2, 2);  // world 4: dp 2 × tp 2; 2 ranks per node
  EXPECT_FALSE(crosses_nodes(l, "tp", 2));
  EXPECT_TRUE(crosses_nodes(l, "dp", 2));
  EXPECT_FALSE(crosses_nodes(l, "cp", 2));  // one rank: no group
  EXPECT_FALSE(crosses_nodes(l, "dp", 4));
}

TEST(PlanHardware, GpuTableAndItsRefusals) {
  EXPECT_DOUBLE_EQ(gpu_peak_flops("H100", at::kBFloat16, false), 989e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("H100", at::kBFloat16, true), 2 * 989e12);
  EXPECT_DOUBLE_EQ(gpu_peak_flops("A100", at::kFloat, false), 19.5e12);
  EXPECT_THROW(gpu_peak_flops("A100", at::kBFloat16, true), std::invalid_argument);
  EXPECT_THROW(gpu_peak_flops("V100", at::kBFloat16, false), std::invalid_argument);
}

TEST(PlanHardware, ABenchCommTableGivesTheAllReducesBandwidthAndLatency) {
  const std::string path = test::scratch_dir("plan_bench_comm") + "/comm.txt";
  std::ofstream(path) << "# dtrain bench-comm: 2 ranks, shm backend, float32, sum; time = slowest rank's mean over 20 iterations\n"
                         "# all_reduce\n"
                         "     size(B)        count   time(us) algbw(GB/s) busbw(GB/s)    wrong\n"
                         "        1024          256       20.0       0.051       0.051        0\n"
                         "    16777216      4194304     5000.0       3.355       3.355        0\n"
                         "# all_gather\n"
                         "    16777216      4194304     9000.0       1.864       0.932        0\n";
  const Link link = link_from_bench_comm(path, "--bench-comm");
  EXPECT_DOUBLE_EQ(link.bus_bytes_per_s, 3.355e9);      // the all-reduce's, at its largest size
  EXPECT_DOUBLE_EQ(link.latency_s, 20e-6 / (2 * (2 - 1)));  // its smallest size over a ring's 2(n-1) steps
  std::ofstream(path) << "# all_gather\n    1024 256 20.0 0.05 0.05 0\n";
  EXPECT_THROW(link_from_bench_comm(path, "--bench-comm"), std::invalid_argument);
}

TEST(LayoutCandidates, TwoRanksEnumerateEveryMeshStageCheckpointingAndMicroBatch) {
  CandidateOptions o;
  o.world_size = 2;
  o.global_batch = 4;
  // dp 2: micro-batches 1 and 2; cp 2, pp 2: 1, 2 and 4; tp 2 the same, with and without SP. Each
  // under 3 checkpointing modes, and where ZeRO has a group of 2 (dp 2, cp 2) under its 4 stages.
  const size_t sharded = 2 + 3, unsharded = 3 + 2 * 3;
  const auto layouts = enumerate_layouts(o);
  EXPECT_EQ(layouts.size(), (sharded * 4 + unsharded) * 3);
  for (const LayoutChoice& c : layouts) {
    EXPECT_EQ(c.dp * c.tp * c.pp * c.cp, 2);
    EXPECT_EQ(c.micro_batch * c.accumulation * c.dp, 4) << c.describe();
    if (c.dp * c.cp == 1) EXPECT_EQ(c.zero_stage, 0) << c.describe();
  }
  o.offload = true;  // stages 1-3 twice, with and without the optimizer offloaded
  EXPECT_EQ(enumerate_layouts(o).size(), (sharded * 7 + unsharded) * 3);
  o.offload = false;
  o.max_micro_batch = 1;  // one micro-batch size per mesh
  EXPECT_EQ(enumerate_layouts(o).size(), size_t((2 * 4 + 1 + 2) * 3));
}

PlanOptions two_ranks(double memory) {
  PlanOptions o;
  o.world_size = 2;
  o.device_memory = memory;
  o.links = default_links(false);
  o.gemm_flops = [](const MemoryLayout&) { return 10e9; };
  return o;
}

nlohmann::json tiny_config(int64_t global_batch) {
  return {{"model", {{"preset", "tiny"}}}, {"train_batch_size", global_batch}};
}

TEST(LayoutPlanner, EveryCandidateIsRankedOrDroppedForAReason) {
  nlohmann::json config = tiny_config(4);
  config["train"] = {{"freeze", {"wte.*"}}};  // frozen embeddings: a formula under every layout here
  const Plan plan = plan_layouts(config, "test config", two_ranks(1e12));
  EXPECT_EQ(plan.considered, ((2 + 3) * 4 + 3 + 2 * 3) * 3);
  EXPECT_EQ(plan.global_batch, 4);
  EXPECT_EQ(plan.not_covered, 0) << plan.not_covered_example;
  EXPECT_EQ(plan.invalid, 0) << plan.invalid_example;
  EXPECT_EQ(plan.not_fitting, 0);
  EXPECT_EQ(plan.considered, plan.invalid + plan.not_covered + plan.not_fitting + int(plan.ranked.size()));
  for (size_t i = 1; i < plan.ranked.size(); ++i) EXPECT_LE(plan.ranked[i - 1].cost.step_s, plan.ranked[i].cost.step_s);
  // Nothing recomputed, one micro-batch per step: the least work and the fewest collectives.
  EXPECT_EQ(plan.ranked.front().choice.checkpointing, "none");
  EXPECT_EQ(plan.ranked.front().choice.accumulation, 1);

  // On a GPU offload would be a layout of its own, but the step's cost does not price it yet: it is
  // not tried, rather than ranked as fast as the same layout without it.
  PlanOptions gpu = two_ranks(1e12);
  gpu.device_is_cpu = false;
  EXPECT_EQ(plan_layouts(config, "test config", gpu).considered, plan.considered);

  // A layout the config checks refuse is counted, not ranked: 3 heads do not split over tp 2.
  config["model"]["n_head"] = 3;
  config["model"]["d_model"] = 48;
  const Plan odd = plan_layouts(config, "test config", two_ranks(1e12));
  EXPECT_EQ(odd.invalid, 2 * 3 * 3) << odd.invalid_example;  // tp 2 with and without SP, 3 micro-batches, 3 modes
  EXPECT_NE(odd.invalid_example.find("tp 2"), std::string::npos) << odd.invalid_example;

  // A layout without an estimate is counted, not ranked: on 4 ranks under the zero_bubble schedule,
  // pp 2 × cp 2 (ring attention's backward inside a stage's peak).
  nlohmann::json zero_bubble = tiny_config(8);
  zero_bubble["parallel"] = {{"pipeline", {{"schedule", "zero_bubble"}}}};
  PlanOptions four = two_ranks(1e12);
  four.world_size = 4;
  const Plan uncovered = plan_layouts(zero_bubble, "test config", four);
  EXPECT_GT(uncovered.not_covered, 0);
  EXPECT_NE(uncovered.not_covered_example.find("pp 2 with cp 2 under the zero_bubble schedule"), std::string::npos)
      << uncovered.not_covered_example;
  EXPECT_EQ(uncovered.considered, uncovered.invalid + uncovered.not_covered + uncovered.not_fitting + int(uncovered.ranked.size()));
  int pipelined = 0;
  for (const PlannedLayout& p : uncovered.ranked) {
    EXPECT_FALSE(p.choice.pp > 1 && p.choice.cp > 1) << p.choice.describe();
    pipelined += p.choice.pp > 1;
  }
  EXPECT_GT(pipelined, 0);  // the other pipelined layouts are ranked
}

TEST(LayoutPlanner, ABudgetOnlyZeroThreeMeetsLeavesOnlyZeroThreeAmongDataParallelLayouts) {
  // GPT-2 124M on short sequences: the model states dominate, 16Ψ per rank under DDP, 4Ψ + 12Ψ/2 at
  // ZeRO-2, 16Ψ/2 and two gathered units at ZeRO-3.
  const nlohmann::json gpt2 = {{"model", {{"preset", "gpt2-124m"}, {"seq_len", 64}}}, {"train_batch_size", 2}};
  // The memory of dp 2 at each stage with everything else at its smallest, from the estimate itself.
  auto memory_at = [&](int stage) {
    nlohmann::json config = gpt2;
    apply_overrides(config, {"zero_optimization.stage=" + std::to_string(stage), "train.activation_checkpointing=full", "parallel.dp=2",
                             "train_micro_batch_size_per_gpu=1"});
    return estimate_memory(estimate_layout(resolve_config(config, 2, "test config"), true, 2)).most_loaded().device_bytes();
  };
  ASSERT_LT(memory_at(3), memory_at(2));
  const Plan plan = plan_layouts(gpt2, "test config", two_ranks(memory_at(3)));
  EXPECT_GT(plan.not_fitting, 0);
  int zero3 = 0;
  for (const PlannedLayout& p : plan.ranked) {
    EXPECT_LE(p.device_bytes, memory_at(3));
    if (p.choice.dp == 2) EXPECT_EQ(p.choice.zero_stage, 3) << p.choice.describe();
    zero3 += p.choice.dp == 2;
  }
  EXPECT_GT(zero3, 0);
}

TEST(LayoutPlanner, TensorParallelismAcrossASlowInterNodeLinkRanksBelowLayoutsKeepingBlocksWithinANode) {
  PlanOptions o = two_ranks(1e12);
  o.world_size = 4;
  o.nodes = 2;
  o.links.inter_node = {1e6, 1e-2};  // 1 MB/s and 10 ms a ring step
  nlohmann::json config = tiny_config(8);
  config["model"]["n_head"] = 4;  // tp 4 needs 4 heads
  const Plan plan = plan_layouts(config, "test config", o);
  ASSERT_FALSE(plan.ranked.empty());
  // Each mesh's best layout (its fastest stage, checkpointing and micro-batch), against those of the
  // meshes whose per-block collectives (tp's and cp's) stay within a node; dp's once a step and pp's
  // sends may cross. (cp 4 across the link is as bad: its ring passes every block.)
  std::map<std::vector<int>, size_t> best;  // (dp, tp, pp, cp) -> its first place in the ranking
  for (size_t i = 0; i < plan.ranked.size(); ++i) {
    const LayoutChoice& c = plan.ranked[i].choice;
    best.try_emplace({c.dp, c.tp, c.pp, c.cp}, i);
  }
  ASSERT_TRUE(best.count({1, 4, 1, 1})) << "no tp 4 layout ranked";
  const size_t tp4 = best[{1, 4, 1, 1}];
  int compared = 0;
  for (const auto& [mesh, place] : best) {
    if (mesh[1] * mesh[3] > 2) continue;
    EXPECT_LT(place, tp4) << plan.ranked[tp4].choice.describe() << " ranks above " << plan.ranked[place].choice.describe();
    ++compared;
  }
  EXPECT_GE(compared, 4);  // dp 4; dp 2 × tp 2; dp 2 × cp 2; pp 4; pp 2 × dp 2; ...
}

TEST(LayoutPlanner, AModelRateIsAskedOnceForEveryFittingLayoutAndReplacesThePeakTimesEfficiency) {
  PlanOptions o = two_ranks(1e12);
  int asked = 0;
  size_t layouts = 0;
  // Micro-batches of 2 run twice as fast as any other: the plan must put one first.
  o.model_flops = [&](const std::vector<MemoryLayout>& fitting) {
    ++asked;
    layouts = fitting.size();
    std::vector<double> rates;
    for (const MemoryLayout& l : fitting) rates.push_back(l.micro_batch == 2 ? 20e9 : 10e9);
    return rates;
  };
  const Plan plan = plan_layouts(tiny_config(4), "test config", o);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(layouts, plan.ranked.size());
  ASSERT_FALSE(plan.ranked.empty());
  EXPECT_EQ(plan.ranked.front().choice.micro_batch, 2) << plan.ranked.front().choice.describe();
  EXPECT_DOUBLE_EQ(plan.peak_flops, 10e9) << "MFU stays against the GEMM peak";
  const MemoryLayout& best = plan.ranked.front().layout;
  CostTarget t = target(2);
  t.links = o.links;
  t.flops_rate = 20e9;
  EXPECT_DOUBLE_EQ(plan.ranked.front().cost.step_s, project_step(best, t).step_s);
}

TEST(ModelRateProbe, TimesEachMicroBatchOnceAndRatesEveryLayoutByIt) {
  std::vector<std::string> heard;
  ModelRateProbe probe(MixedPrecision{}, 0, [&](const std::string& line) { heard.push_back(line); });
  MemoryLayout one = tiny(2), two = tiny(2), split = tiny(1, 2);
  one.micro_batch = 1, two.micro_batch = 2, split.micro_batch = 1;
  const std::vector<double> rates = probe({one, two, split});
  ASSERT_EQ(rates.size(), 3u);
  for (double r : rates) EXPECT_TRUE(std::isfinite(r) && r > 0) << r;
  EXPECT_EQ(rates[0], rates[2]) << "tp keeps the whole width's rate";
  EXPECT_EQ(probe.shapes(), 2u);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_NE(heard[0].find("micro-batch 1: "), std::string::npos) << heard[0];
  const double update = time_update_per_parameter(1 << 16);
  EXPECT_TRUE(std::isfinite(update) && update > 0) << update;
}

}  // namespace
}  // namespace dtrain

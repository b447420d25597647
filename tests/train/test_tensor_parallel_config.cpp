// What parallel.tp and parallel.sequence_parallel ask of a config, checked before any work starts
// (each refusal names its keys and values, and leaves nothing on disk), and what the run's first
// lines say of its mesh.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "config_refusal.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/mesh_lines.h"
#include "train/tensor_parallel_rules.h"
#include "train/train_config.h"
#include "training_run.h"

using namespace dtrain;
using dtrain::test::BadInput;
using dtrain::test::contains;
using dtrain::test::refusal_of;
using dtrain::test::resolved;
using dtrain::test::run_process;
using dtrain::test::scratch_dir;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Each bad input beside its error; every model is small enough for `dtrain run` to reach its check.
const std::vector<BadInput>& tp_bad_inputs() {
  static const std::vector<BadInput> cases = {
      {{"model.preset=tiny", "parallel.sequence_parallel=true"}, 2,
       "'parallel.sequence_parallel' is true, but 'parallel.tp' is 1: sequence parallelism splits the sequence over the tp ranks, "
       "so it needs parallel.tp of 2 or more"},
      {{"model.preset=tiny", "parallel.tp=3"}, 4,
       "'parallel.tp' (3) does not divide the world size (4): the ranks form tp groups of parallel.tp adjacent ranks each"},
      {{"model.preset=tiny", "parallel.dp=2", "parallel.tp=2"}, 2,
       "the parallel dims (parallel.pp, parallel.dp, parallel.cp, parallel.tp) span pp 1 x dp_replicate 1 x dp_shard 2 x cp 1 x "
       "tp 2 = 4 ranks, but the world size is 2"},
      {{"model.preset=tiny", "parallel.tp=4"}, 4,
       "'parallel.tp' (4) does not divide model.n_head (2): tensor parallelism gives each tp rank the same number of whole "
       "attention heads"},
      {{"model.preset=tiny", "model.d_ff=65", "parallel.tp=2"}, 2,
       "'parallel.tp' (2) does not divide model.d_ff (65): tensor parallelism gives each tp rank the same share of the MLP's columns"},
      {{"model.preset=tiny", "model.arch=llama", "model.n_head=6", "model.d_model=96", "parallel.tp=3"}, 3,
       "'parallel.tp' (3) does not divide the MLP width 256 (model.d_ff is not given: 8/3 x model.d_model 96, rounded up to a "
       "multiple of 64): tensor parallelism gives each tp rank the same share of the MLP's columns"},
      {{"model.preset=tiny", "model.arch=llama", "model.n_head=12", "model.n_kv_head=3", "model.d_model=96", "parallel.tp=4"}, 4,
       "'parallel.tp' (4) and model.n_kv_head (3) must divide one another: each tp rank holds n_kv_head / tp key/value heads, or, "
       "where tp is the larger, one key/value head that tp / n_kv_head ranks share"},
      {{"model.preset=tiny", "model.n_head=4", "model.vocab_size=3", "parallel.tp=4"}, 4,
       "'parallel.tp' (4) does not fit model.vocab_size (3): a vocabulary of 3 rows split over tp 4 in chunks of 1 (as "
       "torch.chunk splits it) leaves tp rank 3 without a row; tensor parallelism needs a smaller tp"},
      {{"model.preset=tiny", "model.n_head=4", "model.vocab_size=6", "parallel.tp=4"}, 4,
       "'parallel.tp' (4) does not fit model.vocab_size (6): a vocabulary of 6 rows split over tp 4 in chunks of 2 (as "
       "torch.chunk splits it) leaves tp rank 3 without a row; tensor parallelism needs a smaller tp"},
      {{"model.preset=tiny", "model.seq_len=15", "parallel.tp=2", "parallel.sequence_parallel=true"}, 2,
       "'parallel.tp' (2) does not divide model.seq_len (15), which parallel.sequence_parallel splits over the tp ranks"},
  };
  return cases;
}

}  // namespace

TEST(TensorParallelConfig, EachShapeTpCannotSplitIsRefusedNamingItsKeysAndValues) {
  for (const auto& bad : tp_bad_inputs()) EXPECT_EQ(refusal_of(bad.sets, bad.world), "cfg.json: " + bad.error);
}

TEST(TensorParallelConfig, ShapesTpSplitsAreAccepted) {
  EXPECT_EQ(refusal_of({"model.preset=tiny", "model.n_head=4", "parallel.tp=4"}, 4), "(no error)");
  // Eight query heads over tp 4 with two key/value heads: each kv head replicated on two ranks.
  EXPECT_EQ(refusal_of({"model.preset=tiny", "model.arch=llama", "model.n_head=8", "model.n_kv_head=2", "model.d_model=64",
                           "parallel.tp=4"}, 4),
            "(no error)");
  // Four kv heads over tp 4: one each. A vocabulary of 7 over 4 ranks splits 2, 2, 2, 1, which tp allows.
  EXPECT_EQ(refusal_of({"model.preset=tiny", "model.arch=llama", "model.n_head=8", "model.n_kv_head=4", "model.d_model=64",
                           "model.vocab_size=7", "parallel.tp=4"}, 8),
            "(no error)");
  const TrainConfig sp = resolve_config({{"model", {{"preset", "tiny"}}}, {"parallel", {{"tp", 2}, {"sequence_parallel", true}}}}, 4,
                                        "cfg.json");
  EXPECT_EQ(sp.parallel.describe(), "pp 1 x dp_replicate 1 x dp_shard 2 x cp 1 x tp 2");
  EXPECT_TRUE(sp.sequence_parallel);
  const auto checked = run_process({DTRAIN_BIN, "config", "check", "--world-size", "4", "--set", "model.preset=tiny", "--set",
                                    "parallel.tp=2", "--set", "parallel.sequence_parallel=true"}, 60);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_TRUE(contains(checked.output, "layout     4 rank(s): dp 2 x tp 2, sequence parallel")) << checked.output;
}

// `dtrain config check` refuses what `dtrain run` refuses, and run refuses it before launching a
// rank, leaving its run directory unmade.
TEST(TensorParallelConfig, ConfigCheckAndRunRefuseEachBadInputAndWriteNothing) {
  const std::string dir = scratch_dir("tp_bad_inputs");
  int n = 0;
  for (const auto& bad : tp_bad_inputs()) {
    std::vector<std::string> check = {DTRAIN_BIN, "config", "check", "--world-size", std::to_string(bad.world)};
    const std::string run_dir = dir + "/run-" + std::to_string(n++);
    std::vector<std::string> run = {DTRAIN_BIN, "run", "--no-sample", "--nproc-per-node", std::to_string(bad.world), "--set",
                                    "train.run_dir=" + run_dir};
    for (const auto& s : bad.sets) {
      check.insert(check.end(), {"--set", s});
      run.insert(run.end(), {"--set", s});
    }
    const auto checked = run_process(check, 60);
    EXPECT_EQ(checked.exit_code, 2) << bad.sets.back() << "\n" << checked.output;
    EXPECT_TRUE(contains(checked.output, bad.error)) << checked.output;
    const auto ran = run_process(run, 60, {"OMP_NUM_THREADS=1"});
    EXPECT_NE(ran.exit_code, 0) << ran.output;
    EXPECT_TRUE(contains(ran.output, bad.error)) << ran.output;
    EXPECT_FALSE(contains(ran.output, "dtrain launch")) << "a rank was launched:\n" << ran.output;
    EXPECT_FALSE(fs::exists(run_dir)) << run_dir;
  }
}

TEST(MeshLines, NameTheSplitDimsAndEachGroupsGlobalRanks) {
  ParallelDims dims;
  dims.tp = 2;
  EXPECT_EQ(mesh_lines(dims.resolved(4)),
            (std::vector<std::string>{"mesh: dp_shard 2 x tp 2 (pp, dp_replicate, cp 1)", "dp_shard groups: [0,2] [1,3]; tp groups: [0,1] [2,3]"}));
  // Hybrid sharding: dp, the replicas and shards together, is a group of its own; dp_cp and
  // dp_shard_cp repeat dp and dp_shard, so they are not listed again.
  ParallelDims hybrid;
  hybrid.dp_replicate = 2;
  hybrid.dp_shard = 2;
  EXPECT_EQ(mesh_lines(hybrid.resolved(4)),
            (std::vector<std::string>{"mesh: dp_replicate 2 x dp_shard 2 (pp, cp, tp 1)",
                                      "dp_replicate groups: [0,2] [1,3]; dp_shard groups: [0,1] [2,3]; dp groups: [0,1,2,3]"}));
  EXPECT_EQ(mesh_lines(ParallelDims{}.resolved(1)), std::vector<std::string>{"mesh: 1 rank (pp, dp_replicate, dp_shard, cp, tp 1)"});
}

TEST(MeshLines, ALargeMeshListsItsFirstGroupsAndCountsTheRest) {
  ParallelDims dims;
  dims.tp = 2;
  EXPECT_EQ(mesh_lines(dims.resolved(64))[1],
            "dp_shard groups: [0,2,4,...,62] (32 ranks) [1,3,5,...,63] (32 ranks); "
            "tp groups: [0,1] [2,3] [4,5] [6,7] [8,9] [10,11] [12,13] [14,15] (and 24 more)");
}

TEST(TensorParallelConfig, ATpGroupSpanningNodesIsWarnedOf) {
  auto warnings = [](int tp, int world, int node_ranks) {
    TrainConfig c = resolve_config({{"model", {{"preset", "tiny"}}}, {"parallel", {{"tp", tp}}}}, world, "cfg.json");
    const size_t before = c.warnings.size();
    warn_if_tp_spans_nodes(c, node_ranks);
    return std::vector<std::string>(c.warnings.begin() + long(before), c.warnings.end());
  };
  EXPECT_EQ(warnings(2, 4, 1),
            std::vector<std::string>{"cfg.json: parallel.tp (2) does not divide a node's 1 ranks, so tp groups span nodes: their "
                                     "collectives, several per layer in forward and in backward, cross the link between nodes; a "
                                     "parallel.tp that divides a node's ranks keeps every tp group on one node"});
  EXPECT_EQ(warnings(2, 6, 3).size(), 1u);  // ranks 2 and 3 form a tp group across the first two nodes
  EXPECT_TRUE(warnings(2, 4, 2).empty());
  EXPECT_TRUE(warnings(2, 4, 4).empty());
  EXPECT_TRUE(warnings(1, 4, 1).empty());
}

// Every rank's log opens with the mesh and its groups; only rank 0 says the warning, once.
TEST(TensorParallelConfig, TheRunsFirstLinesShowTheMeshItsGroupsAndATpGroupAcrossNodes) {
  const std::string dir = scratch_dir("tp_mesh_lines");
  const auto run = dtrain::test::train(dir + "/four", 4, {"parallel.tp=2", "train.steps=1"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  for (const std::string& text : {run.result.output, read_text_file(dir + "/four/rank-3.log")}) {
    EXPECT_TRUE(contains(text, "mesh: dp_shard 2 x tp 2 (pp, dp_replicate, cp 1)")) << text;
    EXPECT_TRUE(contains(text, "dp_shard groups: [0,2] [1,3]; tp groups: [0,1] [2,3]")) << text;
  }
  EXPECT_FALSE(contains(run.result.output, "tp groups span nodes")) << run.result.output;

  // Two nodes of one rank each on loopback: the one tp group spans them.
  const std::string port = std::to_string(dtrain::test::free_port());
  auto node = [&](int k) {
    return std::async(std::launch::async, [=] {
      return dtrain::test::train(dir + "/two-nodes", 1, {"parallel.tp=2", "train.steps=1"},
                                 {"--nnodes", "2", "--node-rank", std::to_string(k), "--master-port", port});
    });
  };
  auto node0 = node(0), node1 = node(1);
  const auto second = node1.get();
  ASSERT_EQ(second.result.exit_code, 0) << second.result.output;
  const auto first = node0.get();
  ASSERT_EQ(first.result.exit_code, 0) << first.result.output;
  const std::string warning = "parallel.tp (2) does not divide a node's 1 ranks, so tp groups span nodes";
  const std::string& out = first.result.output;
  EXPECT_NE(out.find(warning), std::string::npos) << out;
  EXPECT_EQ(out.find(warning), out.rfind(warning)) << "said more than once:\n" << out;
  EXPECT_LT(out.find(warning), out.find("training steps")) << "not among the first lines:\n" << out;
  EXPECT_FALSE(contains(second.result.output, warning)) << second.result.output;
}

// The time a step waited for tp's collectives is in metrics.jsonl under tp, and only there: every
// forward all-reduce is waited for at once, so it is never zero.
TEST(TensorParallelConfig, AStepReportsTheTimeItWaitedForTensorParallelCollectives) {
  const std::string dir = scratch_dir("tp_wait_metric");
  const auto tp = dtrain::test::train(dir + "/tp", 2, {"parallel.tp=2", "train.steps=2"});
  ASSERT_EQ(tp.result.exit_code, 0) << tp.result.output;
  ASSERT_EQ(tp.steps.size(), 2u);
  for (const auto& step : tp.steps) {
    ASSERT_TRUE(step.contains("model_parallel_wait_ms")) << step.dump();
    EXPECT_GT(step["model_parallel_wait_ms"].get<double>(), 0) << step.dump();
    EXPECT_LT(step["model_parallel_wait_ms"].get<double>(), step["step_s"].get<double>() * 1e3) << step.dump();
  }
  const auto dp = dtrain::test::train(dir + "/dp", 2, {"train.steps=1"});
  ASSERT_EQ(dp.result.exit_code, 0) << dp.result.output;
  ASSERT_EQ(dp.steps.size(), 1u);
  EXPECT_FALSE(dp.steps[0].contains("model_parallel_wait_ms")) << dp.steps[0].dump();
}

// What parallel.cp and parallel.context.impl ask of a config, checked before any work starts (each
// refusal names its keys and values, and leaves nothing on disk), and what the run's first lines
// say of a 4D mesh.
#include <gtest/gtest.h>

#include <filesystem>

#include "config_refusal.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/mesh_lines.h"
#include "train/train_config.h"

using namespace dtrain;
using dtrain::test::BadInput;
using dtrain::test::contains;
using dtrain::test::refusal_of;
using dtrain::test::run_process;
using dtrain::test::scratch_dir;
namespace fs = std::filesystem;

namespace {

const std::string kUlysses = "parallel.context.impl=\"ulysses\"";
const std::string kUseRing = ": Ulysses deals the heads out over the cp ranks; use parallel.context.impl \"ring\", which takes any head count";

const std::vector<BadInput>& cp_bad_inputs() {
  static const std::vector<BadInput> cases = {
      {{"model.preset=tiny", "model.seq_len=12", "parallel.cp=4"}, 4,
       "model.seq_len (12) is not divisible by 2 x 'parallel.cp' (4): ring attention cuts each sequence into 2 x cp chunks and gives "
       "cp rank r chunks r and 2cp-1-r, so that causal attention costs every rank the same"},
      {{"model.preset=tiny", "model.seq_len=16", "parallel.cp=3", kUlysses}, 3,
       "'parallel.cp' (3) does not divide model.seq_len (16): Ulysses gives each cp rank an equal part of the sequence"},
      {{"model.preset=tiny", "model.seq_len=12", "parallel.cp=3", kUlysses}, 3,
       "'parallel.cp' (3) does not divide the query heads of a rank, model.n_head (2)" + kUseRing},
      {{"model.preset=tiny", "model.arch=llama", "model.n_head=4", "model.n_kv_head=2", "parallel.cp=2", "parallel.tp=2", kUlysses}, 4,
       "'parallel.cp' (2) does not divide the key/value heads of a rank, model.n_kv_head (2) / parallel.tp (2)" + kUseRing},
      {{"model.preset=tiny", "model.n_head=4", "model.seq_len=12", "parallel.cp=2", "parallel.tp=4", "parallel.sequence_parallel=true"}, 8,
       "'parallel.tp' (4) does not divide a cp rank's part of the sequence, model.seq_len (12) / 'parallel.cp' (2), which "
       "parallel.sequence_parallel splits over the tp ranks"},
      {{"model.preset=tiny", "model.n_head=4", "model.seq_len=14", "parallel.cp=2", "parallel.tp=2", "parallel.sequence_parallel=true",
        kUlysses}, 4,
       "'parallel.tp' (2) does not divide a cp rank's part of the sequence, model.seq_len (14) / 'parallel.cp' (2), which "
       "parallel.sequence_parallel splits over the tp ranks"},
      {{"model.preset=tiny", "parallel.cp=2", "parallel.context.impl=\"zigzag\""}, 2,
       "'parallel.context.impl' must be one of ring, ulysses, got \"zigzag\""},
      {{"model.preset=tiny", "parallel.cp=2", "parallel.tp=2", "parallel.dp=2"}, 4,
       "the parallel dims (parallel.pp, parallel.dp, parallel.cp, parallel.tp) span pp 1 x dp_replicate 1 x dp_shard 2 x cp 2 x "
       "tp 2 = 8 ranks, but the world size is 4"},
  };
  return cases;
}

}  // namespace

TEST(ContextParallelConfig, EachSequenceOrHeadCountCpCannotSplitIsRefusedNamingItsKeysAndValues) {
  for (const auto& bad : cp_bad_inputs()) EXPECT_EQ(refusal_of(bad.sets, bad.world), "cfg.json: " + bad.error);
}

TEST(ContextParallelConfig, LayoutsCpSplitsAreAccepted) {
  // Ring takes any head count; Ulysses the heads a tp rank holds, divided over cp.
  EXPECT_EQ(refusal_of({"model.preset=tiny", "model.n_head=1", "model.d_model=32", "parallel.cp=4"}, 4), "(no error)");
  EXPECT_EQ(refusal_of({"model.preset=tiny", "model.arch=llama", "model.n_head=8", "model.n_kv_head=4", "model.d_model=64",
                        "parallel.cp=2", "parallel.tp=2", kUlysses}, 4),
            "(no error)");
  const auto checked = run_process({DTRAIN_BIN, "config", "check", "--world-size", "8", "--set", "model.preset=tiny", "--set",
                                    "parallel.pp=2", "--set", "parallel.cp=2", "--set", "parallel.tp=2"}, 60);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_TRUE(contains(checked.output, "layout     8 rank(s): pp 2 x dp 1 x cp 2 (ring) x tp 2")) << checked.output;
}

// `dtrain run` refuses each before launching a rank, leaving its run directory unmade.
TEST(ContextParallelConfig, RunRefusesEachBadInputAndWritesNothing) {
  const std::string dir = scratch_dir("cp_bad_inputs");
  int n = 0;
  for (const auto& bad : cp_bad_inputs()) {
    const std::string run_dir = dir + "/run-" + std::to_string(n++);
    std::vector<std::string> run = {DTRAIN_BIN, "run", "--no-sample", "--nproc-per-node", std::to_string(bad.world), "--set",
                                    "train.run_dir=" + run_dir};
    for (const auto& s : bad.sets) run.insert(run.end(), {"--set", s});
    const auto ran = run_process(run, 60, {"OMP_NUM_THREADS=1"});
    EXPECT_NE(ran.exit_code, 0) << ran.output;
    EXPECT_TRUE(contains(ran.output, bad.error)) << ran.output;
    EXPECT_FALSE(fs::exists(run_dir)) << run_dir;
  }
}

// The 4D mesh pp x dp x cp x tp: tp neighbours adjacent, cp next, then dp, pp the furthest apart;
// gradients reduce over dp x cp.
TEST(MeshLines, AFourDimensionalMeshListsItsCpAndDpCpGroups) {
  ParallelDims dims;
  dims.pp = 2;
  dims.cp = 2;
  dims.tp = 2;
  EXPECT_EQ(mesh_lines(dims.resolved(16)),
            (std::vector<std::string>{"mesh: pp 2 x dp_shard 2 x cp 2 x tp 2 (dp_replicate 1)",
                                      "pp groups: [0,8] [1,9] [2,10] [3,11] [4,12] [5,13] [6,14] [7,15]; "
                                      "dp_shard groups: [0,4] [1,5] [2,6] [3,7] [8,12] [9,13] [10,14] [11,15]; "
                                      "cp groups: [0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]; "
                                      "tp groups: [0,1] [2,3] [4,5] [6,7] [8,9] [10,11] [12,13] [14,15]; "
                                      "dp_cp groups: [0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]"}));
}

// A vision-language model trained over two ranks, one of which never sees an image, against the
// same job on one rank: the runs finish (nothing collective waits on the rank without images: its
// vision encoder and connector run on no patches and hand their zero gradients to the same buckets
// and gathers as the other rank's) and train alike within the fp32 bounds of another summation
// order (equivalence.h). The ranks run worker_vlm_steps (the trainer's parallelize(), step executor,
// optimizer step and validation over an in-memory dataset, synthetic_image_text.h, whose images
// are all on even samples: rank 0's under dp 2).
//
// Under ZeRO-3 the rank without images gathers the vision encoder's and the connector's units as
// the other rank does. A model that skipped them on that rank (tried by hand when this test was
// written) puts the two ranks' gathers out of step: rank 0 gathers a vision unit where rank 1
// gathers the LLM's first, and the run fails at once on the collective mismatch (a hang would end
// at dist.timeout_s, 20 s here). Data parallelism alone reduces whatever a rank has not produced
// at the end of the backward pass, so the DDP run shows only that the zeros are the right gradient.
#include <gtest/gtest.h>

#include <fstream>

#include "equivalence.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

// The model: vision 2 blocks d 32 over 2x2-pixel patches, grids up to 8 a side, 2x2 merge; llm 2
// blocks d 32, 4 query heads over 2 key/value heads, rows of 24 tokens. 4 steps of a global batch
// of 4 samples; the optimizer and schedule of training_run.h's jobs.
const Sets kVlmJob = {"model.preset=vlm-ocr", "model.n_layer=2", "model.d_model=32", "model.n_head=4", "model.n_kv_head=2",
                      "model.seq_len=24", "model.vision.n_layer=2", "model.vision.n_head=2", "model.vision.d_model=32",
                      "model.vision.patch_size=2", "model.vision.max_grid=8", "train.steps=4", "train.seed=7",
                      "train_batch_size=4", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=auto",
                      "train.eval_samples=8", "gradient_clipping=1.0", "optimizer.params={\"lr\":0.002,\"weight_decay\":0.1,\"eps\":1e-6}",
                      "scheduler={\"type\":\"cosine\",\"params\":{\"warmup_steps\":1}}", "dist.timeout_s=20"};

// `ranks` ranks of worker_vlm_steps under `layout`, in a scratch directory `name`.
TrainingRun train_vlm(const std::string& name, int ranks, const Sets& layout) {
  const std::string dir = scratch_dir(name);
  std::vector<std::string> argv = {DTRAIN_BIN, "launch", "--nproc-per-node", std::to_string(ranks), "--grace-period", "1", "--",
                                   std::string(DTRAIN_TEST_BIN_DIR) + "/worker_vlm_steps", dir};
  for (const Sets& sets : {kVlmJob, layout}) argv.insert(argv.end(), sets.begin(), sets.end());
  return finished_run(run_process(argv, 150, {"OMP_NUM_THREADS=1"}), dir);
}

// `layout` on two ranks against one rank, both with `job_sets` added to the job: the runs, how many
// images each of the two ranks drew, and that they logged every step.
std::pair<TrainingRun, TrainingRun> train_both(const std::string& name, const Sets& layout, const std::string& images_per_rank,
                                               const Sets& job_sets = {}) {
  TrainingRun one_rank = train_vlm(name + "_one_rank", 1, job_sets);
  EXPECT_EQ(one_rank.result.exit_code, 0) << one_rank.result.output;
  EXPECT_TRUE(contains(one_rank.result.output, "rank 0 drew 8 images in 8 training batches")) << one_rank.result.output;
  TrainingRun two_ranks = train_vlm(name, 2, job_sets + layout);
  EXPECT_EQ(two_ranks.result.exit_code, 0) << two_ranks.result.output;
  EXPECT_TRUE(contains(two_ranks.result.output, images_per_rank)) << two_ranks.result.output;
  EXPECT_EQ(two_ranks.steps.size(), 4u) << two_ranks.result.output;
  EXPECT_EQ(two_ranks.validations.size(), 1u) << two_ranks.result.output;
  return {std::move(two_ranks), std::move(one_rank)};
}

void expect_trains_like_one_rank(const std::string& name, const Sets& layout, const std::string& images_per_rank) {
  const auto [two_ranks, one_rank] = train_both(name, layout, images_per_rank);
  expect_same_training(two_ranks, one_rank, 4);
}

const std::string kRankOneSeesNoImage = "[rank 1] rank 1 drew 0 images in 4 training batches";

}  // namespace

TEST(VisionLanguageRanks, DataParallelWithARankThatSeesNoImageTrainsLikeOneRank) {
  expect_trains_like_one_rank("vlm_ranks_ddp", {}, kRankOneSeesNoImage);
}

TEST(VisionLanguageRanks, ZeroThreeWithARankThatSeesNoImageTrainsLikeOneRank) {
  expect_trains_like_one_rank("vlm_ranks_zero3", {"zero_optimization.stage=3"}, kRankOneSeesNoImage);
}

// bf16 with ZeRO-3: the encoder's and the connector's matmul weights are gathered into 16-bit
// working copies, on the rank without images too. Losses and gradient norms within the bf16 bounds;
// the parameters are not compared: the ranks pack other images together than one rank does, so
// their bf16 roundings differ, and a row of the column table that only the widest images read has
// gradients near zero, whose sign AdamW turns into whole steps (measured: one element of the 256,
// 40% of what 4 steps can move it, beyond equivalence.h's bf16 bound).
TEST(VisionLanguageRanks, Bf16ZeroThreeWithARankThatSeesNoImageRunsAndLossesMatchOneRank) {
  const auto [two_ranks, one_rank] = train_both("vlm_ranks_bf16_zero3", {"zero_optimization.stage=3"}, kRankOneSeesNoImage,
                                                {"bf16.enabled=true"});
  detail::expect_lines(two_ranks.steps, one_rank.steps, {{"loss", kBf16Reordered.loss}, {"grad_norm", kBf16Reordered.grad_norm}},
                       "bf16 ZeRO-3 against one rank", kBf16Reordered.why);
  detail::expect_lines(two_ranks.validations, one_rank.validations, {{"val_loss", kBf16Reordered.loss}}, "bf16 ZeRO-3 validation",
                       kBf16Reordered.why);
}

// Tensor parallelism splits the LLM and keeps the vision encoder and the connector whole on both
// ranks, which read the same batches.
TEST(VisionLanguageRanks, TensorParallelOnTheLlmTrainsLikeOneRank) {
  expect_trains_like_one_rank("vlm_ranks_tp", {"parallel.tp=2"}, "[rank 1] rank 1 drew 8 images in 8 training batches");
}

}  // namespace dtrain::test

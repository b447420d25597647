// A vision-language model through `dtrain run` on a jsonl dataset of images of several sizes (and
// rows without one), under each layout the model takes, against one rank: plain data parallelism at
// dp 2, tensor parallelism (tp 2 on the LLM, the encoder and connector whole on both ranks), and the
// per-module plan of a VLM (encoder frozen, connector kept whole, LLM at ZeRO stage 3) against one
// rank with the encoder frozen. Each step's loss and gradient norm and the final parameters within
// the fp32 bounds of another summation order (equivalence.h). Under the plan the frozen encoder ends
// bit for bit as it began, has no optimizer state in the checkpoint and no collective carries it;
// its checkpoints resume under plain data parallelism and back. Broken on purpose, the bounds catch
// it: a sample of each dp-2 micro-batch replaced by another moves step 1's loss by 5e-4 relative; the
// connector's whole bucket summed instead of averaged moves step 1's gradient norm by 16%; the
// column-parallel input gradient averaged instead of summed over tp moves it by 30%.
#include <gtest/gtest.h>

#include "collective_trace.h"
#include "layout_legs.h"
#include "model/transformer.h"
#include "support/scratch.h"
#include "train/training_state.h"
#include "vlm_jsonl_job.h"

namespace dtrain::test {
namespace {

// 4 steps (kBase) of 8 of the 16 samples: one backward per step on each rank.
const Sets kVlmDp2 = {"train_batch_size=8", "train_micro_batch_size_per_gpu=4"};
const Sets kVlmOneRank = {"train_batch_size=8", "train_micro_batch_size_per_gpu=8"};
const Sets kVlmFrozenEncoder = {"train.freeze=[\"vision.*\"]"};
const Sets kVlmPlan = {"parallel.modules={\"vision.*\": {\"freeze\": true}, \"connector.*\": {\"zero_stage\": 0}, "
                    "\"llm.*\": {\"zero_stage\": 3}}"};

// The job's data in its own folder, and the job.
Sets vlm_job_in(const std::string& dir) { return kTinyVlm + Sets{write_vlm_jsonl(dir, equal_target_lines(16))}; }

// The encoder of the run's last checkpoint is its initial weights bit for bit and has no optimizer
// state there; returns the parameter counts under the plan (frozen: vision.*, whole: connector.*).
PlanCounts expect_encoder_untouched(const std::string& run_dir, int step) {
  const std::map<std::string, at::Tensor> saved = read_parameters(ckpt(run_dir, step));
  Transformer initial(load_model(ckpt(run_dir, step))->config(), 7);  // train.seed in kBase
  PlanCounts c;
  for (const auto& item : initial->named_parameters()) {
    const std::string& name = item.key();
    const int64_t n = item.value().numel();
    c.total += n;
    if (detail::starts_with(name, "connector.")) c.whole += n;
    if (!detail::starts_with(name, "vision.")) continue;
    c.frozen += n;
    EXPECT_TRUE(saved.count(name) && at::equal(saved.at(name), item.value())) << name << " changed while frozen";
  }
  const nlohmann::json tensors = index_of(ckpt(run_dir, step)).at("tensors");
  for (auto it = tensors.begin(); it != tensors.end(); ++it)
    if (detail::starts_with(it.key(), "optimizer/")) EXPECT_EQ(it.key().find("vision."), std::string::npos) << it.key() << ": state for a frozen parameter";
  EXPECT_GT(c.frozen, 0);
  return c;
}

}  // namespace

TEST(VisionLanguagePlans, DataAndTensorParallelRunsOnImagesTrainLikeOneRank) {
  const std::string data = scratch_dir("vlm_plans_data");
  const Sets job = vlm_job_in(data);
  const TrainingRun one_rank = train(scratch_dir("vlm_plans_one_rank"), 1, job + kVlmOneRank);
  ASSERT_EQ(one_rank.result.exit_code, 0) << one_rank.result.output;
  EXPECT_TRUE(contains(one_rank.result.output, "16 samples, 12 with an image")) << one_rank.result.output;

  const TrainingRun ddp = train(scratch_dir("vlm_plans_ddp"), 2, job + kVlmDp2);
  EXPECT_TRUE(contains(ddp.result.output, "batch: 8 = micro 4 x accumulation 1 x dp 2")) << ddp.result.output;
  expect_same_training(ddp, one_rank, 4);

  const TrainingRun tp = train(scratch_dir("vlm_plans_tp"), 2, job + kVlmOneRank + Sets{"parallel.tp=2"});
  EXPECT_TRUE(contains(tp.result.output, "tensor parallel: tp 2")) << tp.result.output;
  expect_same_training(tp, one_rank, 4);
}

// Traced: what the plan's collectives carried accounts for the connector's gradients all-reduced
// whole and the LLM's reduce-scattered and gathered, and leaves no room for the encoder's.
TEST(VisionLanguagePlans, ThePerModulePlanTrainsLikeOneRankAndNeverCommunicatesTheFrozenEncoder) {
  const std::string data = scratch_dir("vlm_plan_data");
  const Sets job = vlm_job_in(data);
  const TrainingRun one_rank = train(scratch_dir("vlm_plan_one_rank"), 1, job + kVlmOneRank + kVlmFrozenEncoder);
  ASSERT_EQ(one_rank.result.exit_code, 0) << one_rank.result.output;
  const TrainingRun plan = train(scratch_dir("vlm_plan_dp2"), 2, job + kVlmDp2 + kVlmPlan + Sets{"train.trace=true"});
  ASSERT_EQ(plan.result.exit_code, 0) << plan.result.output;
  expect_same_training(plan, one_rank, 4);
  const PlanCounts c = expect_encoder_untouched(plan.dir, 4);
  const std::string& out = plan.result.output;
  EXPECT_TRUE(contains(out, "parameters: " + std::to_string(c.total) + " total | " + std::to_string(c.total - c.frozen) + " trainable | " +
                                std::to_string(c.frozen) + " frozen")) << out;
  EXPECT_TRUE(contains(out, "parallel.modules 'connector.*': zero_stage 0")) << out;
  EXPECT_TRUE(contains(out, "ZeRO stage 3: ")) << out;
  expect_only_trainable_parameters_communicated(plan.dir, c, 4, 2);
}

// Plan -> plain data parallelism (the encoder frozen by train.freeze) -> plan, each leg resuming the
// last one's checkpoint, against one rank uninterrupted.
TEST(VisionLanguagePlans, ACheckpointOfThePlanResumesUnderPlainDataParallelismAndBack) {
  const std::string data = scratch_dir("vlm_plan_resume_data");
  const Sets job = kLayoutJob + vlm_job_in(data);
  const TrainingRun straight = train(scratch_dir("vlm_plan_resume_straight"), 1, job + kVlmFrozenEncoder);
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  const TrainingRun legs = train_in_legs("vlm_plan_resume", job,
                                         {{2, kVlmPlan, 2, "parallel.modules 'connector.*': zero_stage 0"},
                                          {2, kVlmFrozenEncoder, 4, "batch: 8 = micro 2 x accumulation 2 x dp 2"},
                                          {2, kVlmPlan, 6, "parallel.modules 'vision.*': freeze true"}});
  expect_same_training(legs, straight, 6);
  expect_encoder_untouched(legs.dir, 6);
}

}  // namespace dtrain::test

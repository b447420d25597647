// bf16 and fp16 training end to end: the loss curves against fp32's, ZeRO stage 3's bf16 gathers,
// fp16's loss scaler deciding together across ranks, and exact resume in every precision.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>

#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"

using namespace dtrain;
using namespace dtrain::test;
namespace fs = std::filesystem;

namespace {

double window_mean(const TrainingRun& run, const char* key, size_t from, size_t count) {
  double sum = 0;
  for (size_t i = from; i < from + count; ++i) sum += run.steps[i][key].get<double>();
  return sum / double(count);
}

const std::vector<std::string> kCurve = {"train.steps=300", "steps_per_print=100", "checkpoint.save_at_end=false",
                                         "scheduler={\"type\":\"cosine\",\"params\":{\"warmup_steps\":10}}"};

std::vector<std::string> with(std::vector<std::string> sets, const std::vector<std::string>& more) {
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

}  // namespace

// 300 steps of the tiny model in bf16 and fp16 against fp32, same data in the same order. Bounds:
// - step 1 (same weights, one forward): loss within 2^-9 relative (one bf16 rounding) and gradient
//   norm within 2%: only the 16-bit roundings of activations separate them. An fp16 gradient left
//   scaled by the loss scale, or a lost gradient, is off by orders of magnitude.
// - every 25-step window's mean loss within 8% of fp32's. The runs part ways chaotically (measured:
//   bf16 drifts to ~4% per window, fp16 to ~1%); reshuffling the data alone moves these windows by
//   10-25% here, so 8% still tells a run on the fp32 curve from one that learns differently.
// - the loss falls by at least 90% as much as fp32's from the first window to the last: a working
//   copy that stops following the masters stops learning.
TEST(MixedPrecision, SixteenBitRunsFollowTheFp32LossCurve) {
  const TrainingRun fp32 = train(scratch_dir("curve_fp32"), 1, kCurve);
  ASSERT_EQ(fp32.result.exit_code, 0) << fp32.result.output;
  ASSERT_EQ(fp32.steps.size(), 300u);
  const double fp32_drop = window_mean(fp32, "loss", 0, 25) - window_mean(fp32, "loss", 275, 25);
  for (const std::string format : {"bf16", "fp16"}) {
    const TrainingRun run = train(scratch_dir("curve_" + format), 1, with(kCurve, {format + ".enabled=true"}));
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    ASSERT_EQ(run.steps.size(), 300u);
    EXPECT_TRUE(contains(run.result.output, "precision " + format + " (fp32 master weights, fp32 gradients")) << run.result.output;
    const double loss1 = fp32.steps[0]["loss"], norm1 = fp32.steps[0]["grad_norm"];
    EXPECT_NEAR(run.steps[0]["loss"].get<double>(), loss1, loss1 / 512) << format;
    EXPECT_NEAR(run.steps[0]["grad_norm"].get<double>(), norm1, 0.02 * norm1) << format;
    for (size_t from = 0; from < 300; from += 25) {
      const double expected = window_mean(fp32, "loss", from, 25);
      EXPECT_NEAR(window_mean(run, "loss", from, 25), expected, 0.08 * expected) << format << " steps " << from + 1 << "-" << from + 25;
    }
    const double drop = window_mean(run, "loss", 0, 25) - window_mean(run, "loss", 275, 25);
    EXPECT_GE(drop, 0.9 * fp32_drop) << format;
  }
}

// Stage 3 under bf16 gathers the matmul-only weights in bf16, each rank rounding its piece as plain
// data parallelism rounds the whole weight, and the rest in fp32: on 2 ranks without clipping (whose
// norm is summed in another order) and without accumulation (whose micro-batches are summed in
// another order), the losses and parameters are those of data parallelism bit for bit, GPT-2 with its
// tied embedding and Llama with its separate head. The gathers carry 2 bytes for each matmul weight
// and 4 for the rest: the tiny model's matmul weights are about 70% of it, so about 0.65 of fp32
// gathers' bytes, between 0.5 (everything in bf16, the norms rounded) and 0.75 (the matmul weights
// gathered in fp32 and rounded after).
TEST(MixedPrecision, Stage3GathersMatmulWeightsInBfloatAndTrainsBitForBitLikeDataParallel) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const std::vector<std::string> job = {"model.arch=" + arch, "train_batch_size=16", "train_micro_batch_size_per_gpu=8",
                                          "gradient_clipping=0", "wall_clock_breakdown=true"};
    const auto bf16 = with(job, {"bf16.enabled=true"});
    const TrainingRun ddp = train(scratch_dir("bf16_ddp_" + arch), 2, bf16);
    const TrainingRun zero = train(scratch_dir("bf16_zero3_" + arch), 2, with(bf16, {"zero_optimization.stage=3"}));
    const TrainingRun fp32 = train(scratch_dir("fp32_zero3_" + arch), 2, with(job, {"zero_optimization.stage=3"}));
    for (const TrainingRun* run : {&ddp, &zero, &fp32}) ASSERT_EQ(run->result.exit_code, 0) << run->result.output;
    EXPECT_TRUE(contains(zero.result.output, "matmul weights gathered in bf16, norms, biases and embeddings in fp32")) << zero.result.output;
    ASSERT_EQ(zero.steps.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(zero.steps[i]["loss"].get<double>(), ddp.steps[i]["loss"].get<double>()) << arch << " step " << i + 1;
    expect_same_parameters(final_parameters(zero, 4), final_parameters(ddp, 4));
    const double ratio = zero.steps[3]["unit_gather_bytes"].get<double>() / fp32.steps[3]["unit_gather_bytes"].get<double>();
    EXPECT_GT(ratio, 0.5) << arch;
    EXPECT_LT(ratio, 0.75) << arch;
  }
}

// With parallel.fsdp.param_dtype bf16 every unit holding a matmul weight is gathered in bf16, GPT-2's
// embeddings too (the tied head is a matmul weight), which then trains like one rank that rounds
// alike (equivalence.h's bf16 bounds), and unlike the default, which keeps the position embedding exact.
TEST(MixedPrecision, Stage3GathersInBfloatLikeOneRankThatRoundsAlike) {
  const std::vector<std::string> job = {"bf16.enabled=true", "train_batch_size=16", "zero_optimization.stage=3",
                                        "parallel.fsdp.param_dtype=bf16"};
  const TrainingRun one = train(scratch_dir("bf16_gather_1x16"), 1, job);
  const TrainingRun two = train(scratch_dir("bf16_gather_2x8"), 2, with(job, {"train_micro_batch_size_per_gpu=8"}));
  EXPECT_TRUE(contains(two.result.output, "every unit with matmul weights gathered in bf16")) << two.result.output;
  expect_equivalent(two, one, kBf16Reordered, "2 ranks x 8 against 1 x 16, both gathering in bf16");
  const TrainingRun fp32_gathers = train(scratch_dir("fp32_gather_2x8"), 2,
                                         with(job, {"train_micro_batch_size_per_gpu=8", "parallel.fsdp.param_dtype=fp32"}));
  ASSERT_EQ(fp32_gathers.result.exit_code, 0) << fp32_gathers.result.output;
  const auto rounded = final_parameters(two, 4), exact = final_parameters(fp32_gathers, 4);
  EXPECT_FALSE(at::equal(rounded.at("wpe.weight"), exact.at("wpe.weight"))) << "param_dtype bf16 changed nothing";
}

// An overflow on rank 1 alone (rank 0 saves the checkpoints) skips the step on both: the parameters
// after step 3 are those after step 2, and with hysteresis 1 the scale halves at once. Under ZeRO
// stages 2 and 3 the overflow lands in one rank's gradient shard, and the norm summed over the
// shards carries it to every rank; under tensor parallelism rank 1 holds the other half of every
// layer, and the norm summed over the tp slices does.
TEST(MixedPrecision, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  for (const std::string layout : {"zero_optimization.stage=0", "zero_optimization.stage=2", "zero_optimization.stage=3", "parallel.tp=2"}) {
    const std::vector<std::string> fp16 = {"fp16.enabled=true", "fp16.hysteresis=1", layout};
    const TrainingRun two = train(scratch_dir("fp16_two_steps"), 2, with(fp16, {"train.steps=2"}));
    const TrainingRun injected = train(scratch_dir("fp16_overflow"), 2, with(fp16, {"train.steps=3"}), {}, {"DTRAIN_INJECT_OVERFLOW=3:1"});
    ASSERT_EQ(two.result.exit_code, 0) << two.result.output;
    ASSERT_EQ(injected.result.exit_code, 0) << injected.result.output;
    ASSERT_EQ(injected.steps.size(), 3u);
    EXPECT_EQ(injected.steps[2]["skipped"], "overflow") << layout;
    EXPECT_EQ(injected.steps[2]["loss_scale"].get<double>(), 65536);
    EXPECT_FALSE(injected.steps[1].contains("skipped"));
    EXPECT_TRUE(contains(injected.result.output, "step 3: fp16 gradients overflowed at loss scale 65536; step skipped, loss scale now 32768"))
        << injected.result.output;
    EXPECT_TRUE(contains(injected.result.output, "1 fp16 overflow step(s) skipped (loss scale now 32768)")) << injected.result.output;
    expect_same_parameters(final_parameters(injected, 3), final_parameters(two, 2));
  }
}

// At the minimum scale, another overflow stops the run with DeepSpeed's message.
TEST(MixedPrecision, OverflowingAtTheMinimumScaleStopsTheRun) {
  const TrainingRun run = train(scratch_dir("fp16_minimum"), 1,
                                {"fp16.enabled=true", "fp16.initial_scale_power=0", "fp16.hysteresis=1", "train.steps=3"}, {},
                                {"DTRAIN_INJECT_OVERFLOW=2:0"});
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_TRUE(contains(run.result.output, "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."))
      << run.result.output;
}

// Stopping after step 3 and resuming reproduces the uninterrupted run bit for bit, the fp16 loss
// scale included: a window of 2 and an overflow at step 2 make it change on both sides of the stop.
TEST(MixedPrecision, ResumeIsExactInBfloatAndHalf) {
  for (const std::vector<std::string>& precision :
       {std::vector<std::string>{"bf16.enabled=true"},
        std::vector<std::string>{"fp16.enabled=true", "fp16.loss_scale_window=2", "fp16.hysteresis=1"}}) {
    const auto job = with(precision, {"train.steps=6", "train.deterministic=true"});
    const std::vector<std::string> env = {"DTRAIN_INJECT_OVERFLOW=2:0"};
    const TrainingRun straight = train(scratch_dir("mp_straight"), 2, job, {}, env);
    const std::string dir = scratch_dir("mp_resumed");
    ASSERT_EQ(train(dir, 2, with(job, {"train.stop_at_step=3"}), {}, env).result.exit_code, 0);
    const TrainingRun resumed = train(dir, 2, job, {}, env);
    ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
    ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    ASSERT_EQ(resumed.steps.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), straight.steps[i]["loss"].get<double>()) << precision[0] << " step " << i + 1;
      EXPECT_EQ(resumed.steps[i].value("loss_scale", 0.0), straight.steps[i].value("loss_scale", 0.0)) << precision[0] << " step " << i + 1;
    }
    expect_same_parameters(final_parameters(resumed, 6), final_parameters(straight, 6));
  }
}

// Checkpoints hold fp32 weights in every precision, so a run continues in another one: here a bf16
// checkpoint in fp32 and in fp16. The first step after the switch computes the loss of the same
// weights, so it agrees with the straight run to 16-bit precision (2^-8 relative).
TEST(MixedPrecision, ACheckpointResumesInAnotherPrecision) {
  const std::string source = scratch_dir("convert_source");
  ASSERT_EQ(train(source, 1, {"bf16.enabled=true", "train.stop_at_step=3", "train.steps=6"}).result.exit_code, 0);
  const TrainingRun straight = train(scratch_dir("convert_straight"), 1, {"bf16.enabled=true", "train.steps=6"});
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
  for (const auto& [set, note] : std::vector<std::pair<std::string, std::string>>{
           {"bf16.enabled=false", "it was saved by a bf16 run, and its fp32 weights continue in fp32"},
           {"fp16.enabled=true", "the checkpoint holds no fp16 loss scale (it was saved in bf16); the scale starts at 65536"}}) {
    const std::string dir = scratch_dir("convert");
    fs::copy(source, dir, fs::copy_options::recursive);
    const TrainingRun run = train(dir, 1, {set, "train.steps=6"});
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_TRUE(contains(run.result.output, note)) << run.result.output;
    ASSERT_EQ(run.steps.size(), 6u);
    const double expected = straight.steps[3]["loss"];
    EXPECT_NEAR(run.steps[3]["loss"].get<double>(), expected, expected / 256) << set;
  }
}

// The pipeline rows of the feature matrix can fail: a pp 2 run broken on purpose (train/injected_faults.h)
// — a micro-batch left out of the gradient, the tied embedding's copies not summed, the micro-batches'
// gradients summed without their 1/m — is not equivalent to one rank under the suite's fp32 bounds
// (equivalence.h), while the same run unbroken is. The comparison's failures are caught, not
// counted, and each test passes exactly when the comparison names what the fault broke.
#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>

#include "support/process.h"
#include "support/scratch.h"
#include "equivalence.h"

namespace dtrain::test {
namespace {

// GPT-2 with its embedding tied to the head over 4 blocks, a global batch of 12: the reference
// takes it whole on one rank, pp 2 runs it as 4 micro-batches of 3 (gpt2_pp_3d in the matrix).
constexpr int kMutationSteps = 4;  // kBase's train.steps
const Sets kMutationJob = {"model.arch=gpt2", "model.n_layer=4", "train_batch_size=12"};
const Sets kMutationOneRank = {"train_micro_batch_size_per_gpu=12"};
const Sets kMutationPp2 = {"parallel.pp=2", "train_micro_batch_size_per_gpu=3"};

// `variable`=1:0,1:1,2:0,...: the fault on both ranks at every step.
std::string on_every_step_and_rank(const std::string& variable) {
  std::string entries;
  for (int step = 1; step <= kMutationSteps; ++step)
    for (int rank = 0; rank < 2; ++rank) entries += (entries.empty() ? "" : ",") + std::to_string(step) + ":" + std::to_string(rank);
  return variable + "=" + entries;
}

// What expect_equivalent reports comparing `got` with `expected` under the fp32 bounds, caught.
std::vector<std::string> equivalence_failures(const TrainingRun& got, const TrainingRun& expected) {
  ::testing::TestPartResultArray caught;
  {
    const ::testing::ScopedFakeTestPartResultReporter catching(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD,
                                                               &caught);
    expect_equivalent(got, expected, kFp32Reordered, "pp 2 against one rank");
  }
  std::vector<std::string> failures;
  for (int i = 0; i < caught.size(); ++i) failures.push_back(caught.GetTestPartResult(i).message());
  return failures;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

bool any_contains(const std::vector<std::string>& failures, const std::string& needle) {
  for (const auto& f : failures)
    if (contains(f, needle)) return true;
  return false;
}

class PipelineMutation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference_ = new TrainingRun(train(scratch_dir("pp_mutation_one_rank"), 1, kMutationJob + kMutationOneRank)); }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }

  // pp 2 with `env`'s fault, compared with the one-rank run: the comparison's failures. The broken
  // run itself must succeed, or a failure would say nothing of the comparison.
  static std::vector<std::string> failures_of_pp2(const std::string& name, const std::vector<std::string>& env) {
    const TrainingRun got = train(scratch_dir("pp_mutation_" + name), 2, kMutationJob + kMutationPp2, {}, env);
    EXPECT_EQ(got.result.exit_code, 0) << got.result.output;
    if (got.result.exit_code != 0) return {};
    EXPECT_TRUE(contains(got.result.output, "4 micro-batches per step")) << got.result.output;
    return equivalence_failures(got, *reference_);
  }

  static TrainingRun* reference_;
};

TrainingRun* PipelineMutation::reference_ = nullptr;

TEST_F(PipelineMutation, TheUnbrokenPipelineIsEquivalent) {
  ASSERT_EQ(reference_->result.exit_code, 0) << reference_->result.output;
  const auto failures = failures_of_pp2("unbroken", {});
  EXPECT_TRUE(failures.empty()) << joined(failures);
}

// A quarter of the gradient missing: the first step's norm is off (its loss, a forward, is not),
// and so is every later step's loss and the final parameters.
TEST_F(PipelineMutation, ADroppedMicroBatchIsCaught) {
  ASSERT_EQ(reference_->result.exit_code, 0) << reference_->result.output;
  const auto failures = failures_of_pp2("dropped_micro_batch", {on_every_step_and_rank("DTRAIN_INJECT_DROP_MICRO_BATCH")});
  EXPECT_TRUE(any_contains(failures, "step 1 grad_norm")) << joined(failures);
  EXPECT_FALSE(any_contains(failures, "step 1 loss")) << joined(failures);
  EXPECT_TRUE(any_contains(failures, "step 2 loss")) << joined(failures);
  EXPECT_TRUE(any_contains(failures, "parameter blocks.0.q_proj.weight")) << joined(failures);
}

// Each copy of the tied embedding steps with its own stage's half of the gradient: the copies
// part, and the checkpoint (the first stage's) holds a weight the one-rank run never had.
TEST_F(PipelineMutation, AnUnsummedTiedEmbeddingIsCaught) {
  ASSERT_EQ(reference_->result.exit_code, 0) << reference_->result.output;
  const auto failures = failures_of_pp2("unsummed_tied_gradient", {on_every_step_and_rank("DTRAIN_INJECT_DROP_TIED_GRADIENT")});
  EXPECT_TRUE(any_contains(failures, "step 1 grad_norm")) << joined(failures);
  EXPECT_TRUE(any_contains(failures, "parameter wte.weight")) << joined(failures);
}

// Gradients 4 times too large: AdamW and clipping hide the scale from the parameters, but not
// from the norm, which the comparison reads before clipping.
TEST_F(PipelineMutation, AMissingOneOverMicroBatchesIsCaught) {
  ASSERT_EQ(reference_->result.exit_code, 0) << reference_->result.output;
  const auto failures = failures_of_pp2("unaveraged", {on_every_step_and_rank("DTRAIN_INJECT_UNAVERAGED_MICRO_BATCHES")});
  EXPECT_TRUE(any_contains(failures, "step 1 grad_norm")) << joined(failures);
}

}  // namespace
}  // namespace dtrain::test

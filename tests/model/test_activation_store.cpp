// DeepSpeed's activation_checkpointing keys (model/activation_store.h): however a checkpointed
// block input is kept (split over ranks, in host memory, in one buffer), the recomputation starts
// from the same bits, so losses and gradients match keeping every activation bit for bit.
#include <gtest/gtest.h>

#include "checkpointed_step.h"
#include "support/process.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

ActivationStoreOptions keys(bool partition, bool host_memory, bool contiguous, int slots = 0) {
  ActivationStoreOptions o;
  o.partition = partition;
  o.host_memory = host_memory;
  o.contiguous = contiguous;
  o.slots = slots;
  return o;
}

std::string what_throws(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// On one rank partitioning has nothing to split and the CPU is host memory already: those keys
// leave the inputs to autograd. The buffer takes a copy of each checkpointed input, one slot each,
// and gives the slots back in backward, so the second micro-batch finds them free.
TEST(ActivationStore, EachKeyOnOneRankTrainsBitForBitLikeKeepingEveryActivation) {
  struct Case {
    ActivationStoreOptions store;
    bool buffered;
  };
  const std::vector<Case> cases = {{keys(true, false, false), false},
                                   {keys(false, true, false), false},
                                   {keys(true, false, true, 2), true},
                                   {keys(true, true, true, 3), true}};
  for (const std::string arch : {"gpt2", "llama"})
    for (const auto precision : {at::kFloat, at::kBFloat16})
      for (const std::string mode : {"full", "every:2"}) {
        const StepResult kept = checkpointed_step({arch, "none", false, precision});
        for (const auto& [store, buffered] : cases) {
          StepSetup setup{arch, mode, false, precision, store};
          const StepResult stored = checkpointed_step(setup);
          const std::string what = arch + " " + mode + " " + precision_name(precision) + " partition " + std::to_string(store.partition) +
                                   " host " + std::to_string(store.host_memory) + " contiguous " + std::to_string(store.contiguous);
          std::string why;
          EXPECT_TRUE(same_bits(kept, stored, why)) << what << ": " << why;
          const int blocks = mode == "full" ? 2 : 1;
          EXPECT_EQ(stored.checkpointed_segments, blocks) << what;
          EXPECT_EQ(stored.held_after_forward, buffered ? blocks * stored.block_input_numel : 0) << what;
          EXPECT_EQ(stored.held_after_backward, 0) << what;
          EXPECT_EQ(stored.buffer_numel, buffered ? store.slots * stored.block_input_numel : 0) << what;
        }
      }
}

// DeepSpeed would fail with an index error at the checkpoint past number_checkpoints; the store says
// which key to raise.
TEST(ActivationStore, MoreCheckpointedInputsThanSlotsIsANamedError) {
  const std::string error = what_throws([] { checkpointed_step({"gpt2", "full", false, at::kFloat, keys(true, false, true, 1)}); });
  EXPECT_NE(error.find("activation_checkpointing.number_checkpoints (1)"), std::string::npos) << error;
  EXPECT_NE(error.find("all 1 slots of the buffer"), std::string::npos) << error;
  EXPECT_NE(what_throws([] { ActivationStore::make(keys(true, false, true, 0), nullptr); }).find("at least one slot"), std::string::npos);
}

// A forward pass whose graph is dropped without a backward (a step abandoned midway) gives its
// slots back too.
TEST(ActivationStore, ADroppedGraphGivesItsSlotsBack) {
  TransformerConfig c = model_preset("tiny");
  Transformer m(c, 11);
  ActivationCheckpointing ac = ActivationCheckpointing::parse("full");
  ac.store = keys(true, false, true, 2);
  m->set_activation_checkpointing(ac);
  const auto tokens = at::randint(0, c.vocab_size, {2, c.seq_len}, at::kLong);
  for (int pass = 0; pass < 3; ++pass) {
    at::Tensor logits = m->forward(tokens);
    EXPECT_EQ(m->activation_store()->held_elements(), 2 * 2 * c.seq_len * c.d_model);
  }
  EXPECT_EQ(m->activation_store()->held_elements(), 0);
}

// The store gives the inputs back after the first backward; a second one through the same graph
// is refused by name rather than recomputing from freed memory.
TEST(ActivationStore, ASecondBackwardThroughTheSameGraphIsRefused) {
  auto store = ActivationStore::make(keys(true, false, true, 1), nullptr);
  auto x = at::randn({4, 8}).requires_grad_(true);
  auto y = checkpoint([](const std::vector<at::Tensor>& in) { return in[0].sin(); }, {x}, store).sum();
  y.backward({}, /*retain_graph=*/true);
  const at::Tensor first = x.grad().clone();
  EXPECT_TRUE(at::equal(first, x.detach().cos()));
  EXPECT_NE(what_throws([&] { y.backward(); }).find("back-propagated twice"), std::string::npos);
}

// Two ranks that hold the same block input (as tensor-parallel ranks do) keep half of it each and
// gather it for the recomputation (worker_activation_store.cpp says what each rank checks).
TEST(ActivationStore, PartitionOverTwoRanksKeepsHalfPerRankAndTrainsBitForBit) {
  const ProcessResult r = run_process({DTRAIN_BIN, "launch", "--nproc-per-node", "2", "--grace-period", "1", "--",
                                       std::string(DTRAIN_TEST_BIN_DIR) + "/worker_activation_store"},
                                      180, {"OMP_NUM_THREADS=1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const std::string rank : {"0", "1"})
    for (const std::string scenario : {"uneven", "partition"})
      EXPECT_TRUE(contains(r.output, "[rank " + rank + "] PASS " + scenario)) << r.output;
}

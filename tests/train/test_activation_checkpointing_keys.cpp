// DeepSpeed's activation_checkpointing keys as a DeepSpeed config sets them: resolved with
// DeepSpeed's rules, their mistakes named, and each one saying in the run's log what it does.
#include <gtest/gtest.h>

#include "support/process.h"
#include "support/scratch.h"
#include "train/train_config.h"
#include "training_run.h"

using namespace dtrain;
using json = nlohmann::json;

namespace {

// The "activation_checkpointing" section of the DeepSpeed ZeRO-3 config in the source notes on
// pre-training infrastructure, as written there.
const json kDeepSpeedSection = {{"partition_activations", true}, {"cpu_checkpointing", true},  {"contiguous_memory_optimization", true},
                                {"number_checkpoints", nullptr},  {"synchronize_checkpoint_boundary", false}, {"profile", false}};

// The tiny model (2 blocks) under `mode`, with `section` as its activation_checkpointing.
json ds_job(const std::string& mode, const json& section = kDeepSpeedSection) {
  return {{"model", {{"preset", "tiny"}}}, {"train", {{"activation_checkpointing", mode}}}, {"activation_checkpointing", section}};
}

std::string keys_error_of(const json& user) {
  try {
    resolve_config(user, 1, "cfg.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

json with_key(json section, const std::string& key, const json& value) {
  section[key] = value;
  return section;
}

}  // namespace

// number_checkpoints null: the buffer has a slot per block input one forward pass checkpoints.
TEST(ActivationCheckpointingKeys, TheDeepSpeedSectionResolvesWithASlotPerCheckpointedBlock) {
  for (const auto& [mode, slots] : std::vector<std::pair<std::string, int>>{{"full", 2}, {"every:2", 1}}) {
    const TrainConfig c = resolve_config(ds_job(mode), 1, "cfg.json");
    const ActivationStoreOptions& s = c.activation_checkpointing.store;
    EXPECT_TRUE(s.partition && s.host_memory && s.contiguous) << mode;
    EXPECT_EQ(s.slots, slots) << mode;
    EXPECT_EQ(c.json["activation_checkpointing"]["number_checkpoints"], slots) << mode;
    EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  }
  // A larger count is DeepSpeed's to give: the buffer has that many slots.
  EXPECT_EQ(resolve_config(ds_job("full", with_key(kDeepSpeedSection, "number_checkpoints", 5)), 1, "cfg.json").activation_checkpointing.store.slots, 5);
}

// Without blocks recomputed whole the keys have nothing to keep: accepted, as DeepSpeed would, but said.
TEST(ActivationCheckpointingKeys, WithoutBlocksRecomputedWholeTheyAreAWarningAndOff) {
  for (const std::string mode : {"none", "selective"}) {
    const TrainConfig c = resolve_config(ds_job(mode), 1, "cfg.json");
    EXPECT_FALSE(c.activation_checkpointing.store.any()) << mode;
    ASSERT_EQ(c.warnings.size(), 1u) << mode;
    EXPECT_NE(c.warnings[0].find("train.activation_checkpointing " + mode + " recomputes none: they have no effect"), std::string::npos)
        << c.warnings[0];
  }
  const TrainConfig c = resolve_config(ds_job("full", {{"number_checkpoints", 4}}), 1, "cfg.json");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("'activation_checkpointing.number_checkpoints' sizes the buffer of "
                               "activation_checkpointing.contiguous_memory_optimization, which is off: it has no effect"),
            std::string::npos)
      << c.warnings[0];
}

TEST(ActivationCheckpointingKeys, MistakesAreNamedByTheirKey) {
  EXPECT_EQ(keys_error_of(ds_job("full", with_key(kDeepSpeedSection, "partition_activations", false))),
            "cfg.json: 'activation_checkpointing.contiguous_memory_optimization' needs 'activation_checkpointing.partition_activations' "
            "true, as in DeepSpeed: the buffer holds each rank's partitioned pieces");
  EXPECT_EQ(keys_error_of(ds_job("full", with_key(kDeepSpeedSection, "number_checkpoints", 1))),
            "cfg.json: 'activation_checkpointing.number_checkpoints' is 1, but train.activation_checkpointing full checkpoints 2 block "
            "inputs in each forward pass of the 2-layer model, and contiguous_memory_optimization's buffer needs a slot for each: set it "
            "to at least 2, or null to use that count");
  EXPECT_EQ(keys_error_of(ds_job("full", with_key(kDeepSpeedSection, "number_checkpoints", 0))),
            "cfg.json: 'activation_checkpointing.number_checkpoints' must be between 1 and 2147483647, got 0");
  EXPECT_EQ(keys_error_of(ds_job("full", with_key(kDeepSpeedSection, "number_checkpoints", "all"))),
            "cfg.json: 'activation_checkpointing.number_checkpoints' must be a whole number, got \"all\"");
  EXPECT_EQ(keys_error_of(ds_job("full", with_key(kDeepSpeedSection, "cpu_checkpointing", "yes"))),
            "cfg.json: 'activation_checkpointing.cpu_checkpointing' must be true or false, got \"yes\"");
}

// The section as DeepSpeed users write it trains under `dtrain run`, each key saying once what it
// does on a one-rank CPU run (docs/training.md).
TEST(ActivationCheckpointingKeys, TheDeepSpeedSectionTrainsAndSaysWhatEachKeyDoes) {
  const test::TrainingRun run = test::train(test::scratch_dir("ac_deepspeed_keys"), 1,
                                            {"train.activation_checkpointing=full", "activation_checkpointing=" + kDeepSpeedSection.dump()});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_FALSE(run.steps.empty());
  for (const std::string line :
       {"activation_checkpointing.partition_activations: tp is 1, nothing to partition",
        "activation_checkpointing.cpu_checkpointing: this run computes on the CPU, so checkpointed activations already are in host "
        "memory; nothing moves",
        "activation_checkpointing.contiguous_memory_optimization: checkpointed block inputs copied into one buffer on the cpu of 2 slots "
        "(activation_checkpointing.number_checkpoints; this model checkpoints 2 block inputs per forward pass), allocated at the first "
        "checkpoint"}) {
    EXPECT_TRUE(test::contains(run.result.output, line)) << line << "\n" << run.result.output;
    EXPECT_EQ(run.result.output.find(line), run.result.output.rfind(line)) << "said more than once: " << line;
  }
}

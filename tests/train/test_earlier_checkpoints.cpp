// A checkpoint of the release before q, k and v were separate parameters (blocks.N.qkv, proj, fc,
// fc_proj, stored at index version 1) loads: each of today's tensors is read from the rows of the
// earlier one it was part of (ckpt/earlier_parameter_names.h), for training and generation alike, and
// a run resumed from it trains like the run that never stopped.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <filesystem>
#include <regex>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/sharded_checkpoint.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/training_state.h"
#include "equivalence.h"
#include "training_run.h"
#include "version_one_checkpoint.h"

namespace dtrain::test {
namespace {

using json = nlohmann::json;

// The tensors as the earlier release named and stored them, model and optimizer state alike:
// q, k, v stacked by rows into qkv; Llama's gate and up into fc (gate first), GPT-2's up renamed
// fc; o_proj named proj and down_proj fc_proj.
void fuse_as_earlier_release(WholeTensors& t) {
  const std::regex part(R"(^(.*blocks\.[0-9]+\.)(q_proj|up_proj|o_proj|down_proj)(\.(weight|bias))$)");
  WholeTensors out;
  for (const auto& [name, tensor] : t) {
    std::smatch m;
    if (!std::regex_match(name, m, part)) continue;
    const std::string block = m[1], which = m[2], suffix = m[3];
    const auto take = [&](const std::string& p) { return t.at(block + p + suffix); };
    if (which == "q_proj") out[block + "qkv" + suffix] = at::cat({tensor, take("k_proj"), take("v_proj")});
    if (which == "up_proj")
      out[block + "fc" + suffix] = t.count(block + "gate_proj" + suffix) ? at::cat({take("gate_proj"), tensor}) : tensor;
    if (which == "o_proj") out[block + "proj" + suffix] = tensor;
    if (which == "down_proj") out[block + "fc_proj" + suffix] = tensor;
  }
  const std::regex separate(R"(^.*blocks\.[0-9]+\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.(weight|bias)$)");
  for (const auto& [name, tensor] : t)
    if (!std::regex_match(name, separate)) out[name] = tensor;
  t = out;
}

// A global batch of 4 on any number of ranks, ZeRO-1's flat ranges of the state on two.
std::vector<std::string> model_job(const std::vector<std::string>& model, std::vector<std::string> more = {}) {
  std::vector<std::string> sets = {"train.steps=4", "train_batch_size=4", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=auto",
                                   "zero_optimization.stage=1", "checkpoint.every_steps=2", "checkpoint.keep=0"};
  sets.insert(sets.end(), model.begin(), model.end());
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

const std::string kMapped = "holds the earlier release's fused parameter names";

// A checkpoint of step 2 of `model`'s job on 2 ranks, rewritten as the earlier release stored it.
std::string earlier_release_checkpoint(const std::string& dir, const std::vector<std::string>& model) {
  const TrainingRun first = train(dir, 2, model_job(model, {"train.stop_at_step=2"}));
  EXPECT_EQ(first.result.exit_code, 0) << first.result.output;
  rewrite_as_version_one(ckpt(dir, 2), 2, fuse_as_earlier_release);
  EXPECT_NO_THROW(CheckpointManager::verify(ckpt(dir, 2)));
  return ckpt(dir, 2);
}

}  // namespace

TEST(EarlierCheckpoint, EachSeparateParameterIsReadFromItsRowsOfTheFusedOne) {
  const std::string step_dir = earlier_release_checkpoint(scratch_dir("earlier_rows"), {"model.arch=llama", "model.n_head=4", "model.n_kv_head=2"});
  ShardedCheckpointReader stored(step_dir);
  ASSERT_EQ(stored.version(), 1);
  ASSERT_TRUE(stored.tensors().count("model/blocks.0.qkv.weight"));
  ASSERT_TRUE(stored.tensors().count("optimizer/exp_avg/blocks.1.fc.weight"));
  ASSERT_FALSE(stored.tensors().count("model/blocks.0.q_proj.weight"));
  const Transformer model = load_model(step_dir);
  std::map<std::string, at::Tensor> loaded;
  for (auto& item : model->named_parameters()) loaded[item.key()] = item.value();
  const TransformerConfig c = model->config();
  const int64_t q = c.n_head * c.head_dim(), kv = c.kv_heads() * c.head_dim(), ff = c.ff_dim();
  ASSERT_LT(kv, q);  // grouped-query attention: k and v are shorter than q
  for (int b = 0; b < c.n_layer; ++b) {
    const std::string block = "model/blocks." + std::to_string(b) + ".", name = "blocks." + std::to_string(b) + ".";
    const at::Tensor qkv = stored.read(block + "qkv.weight"), fc = stored.read(block + "fc.weight");
    EXPECT_TRUE(at::equal(loaded.at(name + "q_proj.weight"), qkv.narrow(0, 0, q)));
    EXPECT_TRUE(at::equal(loaded.at(name + "k_proj.weight"), qkv.narrow(0, q, kv)));
    EXPECT_TRUE(at::equal(loaded.at(name + "v_proj.weight"), qkv.narrow(0, q + kv, kv)));
    EXPECT_TRUE(at::equal(loaded.at(name + "gate_proj.weight"), fc.narrow(0, 0, ff)));
    EXPECT_TRUE(at::equal(loaded.at(name + "up_proj.weight"), fc.narrow(0, ff, ff)));
    EXPECT_TRUE(at::equal(loaded.at(name + "o_proj.weight"), stored.read(block + "proj.weight")));
    EXPECT_TRUE(at::equal(loaded.at(name + "down_proj.weight"), stored.read(block + "fc_proj.weight")));
  }
  // From the command line too.
  const auto r = run_process({DTRAIN_BIN, "generate", "--checkpoint", step_dir, "--prompt", "Hi", "--tokens", "4"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(EarlierCheckpoint, ATensorUnderNeitherNameOrOfAnotherShapeIsRefusedNamingIt) {
  const std::string dir = scratch_dir("earlier_refused"), lacking = scratch_dir("earlier_lacking") + "/step";
  ASSERT_EQ(train(dir, 1, model_job({"model.arch=gpt2"}, {"train.stop_at_step=2"})).result.exit_code, 0);
  const std::string step_dir = ckpt(dir, 2);
  std::filesystem::copy(step_dir, lacking, std::filesystem::copy_options::recursive);
  // Neither blocks.1.qkv.weight nor its parts: named as the parameter it lacks, as any other.
  rewrite_as_version_one(lacking, 1, [](WholeTensors& t) {
    fuse_as_earlier_release(t);
    t.erase("model/blocks.1.qkv.weight");
  });
  try {
    load_model(lacking);
    ADD_FAILURE() << "a checkpoint lacking blocks.1's q, k and v loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), lacking + "/index.json has no parameter 'blocks.1.k_proj.weight'")) << e.what();
  }
  // A fused tensor must be its parts' rows stacked, no more: a run refuses to resume it.
  rewrite_as_version_one(step_dir, 1, [](WholeTensors& t) {
    fuse_as_earlier_release(t);
    t["model/blocks.0.fc.bias"] = at::cat({t.at("model/blocks.0.fc.bias"), at::zeros({1})});
  });
  const TrainingRun resumed = train(dir, 1, model_job({"model.arch=gpt2"}));
  EXPECT_NE(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_TRUE(contains(resumed.result.output, step_dir + "/index.json: parameter 'blocks.0.fc.bias' has shape [129], the model expects [128]"))
      << resumed.result.output;
}

TEST(Resume, ACheckpointOfTheEarlierFusedNamesResumesLikeTheUninterruptedRun) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> models = {
      {"gpt2", {"model.arch=gpt2"}}, {"llama", {"model.arch=llama", "model.n_head=4", "model.n_kv_head=2"}}};
  for (const auto& [arch, model] : models) {
    const TrainingRun straight = train(scratch_dir("earlier_straight_" + arch), 2, model_job(model));
    ASSERT_EQ(straight.result.exit_code, 0) << straight.result.output;
    for (const int ranks : {2, 1}) {
      const std::string dir = scratch_dir("earlier_" + arch + "_on_" + std::to_string(ranks));
      const std::string step_dir = earlier_release_checkpoint(dir, model);
      const TrainingRun resumed = train(dir, ranks, model_job(model, {ranks == 2 ? "zero_optimization.stage=3" : "zero_optimization.stage=0"}));
      ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
      EXPECT_TRUE(contains(resumed.result.output, "resumed from " + step_dir + " at step 2")) << resumed.result.output;
      EXPECT_TRUE(contains(resumed.result.output, step_dir + " " + kMapped)) << resumed.result.output;
      SCOPED_TRACE(arch + ": the earlier release's checkpoint of 2 ranks resumed on " + std::to_string(ranks));
      expect_same_training(resumed, straight, 4);
    }
  }
}

}  // namespace dtrain::test

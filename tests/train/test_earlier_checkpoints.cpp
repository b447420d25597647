// A checkpoint of the model before q, k and v were separate parameters (blocks.N.qkv.weight) does not
// load into today's model: it is refused naming that tensor and what saved it, for training and for
// generation alike, rather than as a list of parameters it lacks.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "ckpt/sharded_checkpoint.h"
#include "optim/flat_optimizer.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/training_state.h"
#include "training_run.h"

using namespace dtrain;
using namespace dtrain::test;
using json = nlohmann::json;

namespace {

// The parameters of the tiny GPT-2 preset as dtrain named and shaped them while q, k and v were fused.
std::map<std::string, GlobalTensor> fused_layout(const TransformerConfig& c) {
  const int64_t d = c.d_model, f = c.ff_dim();
  std::map<std::string, GlobalTensor> t = {{"wte.weight", {{c.vocab_size, d}}}, {"wpe.weight", {{c.seq_len, d}}},
                                           {"ln_f.weight", {{d}}},               {"ln_f.bias", {{d}}}};
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"ln1.weight", {d}}, {"ln1.bias", {d}}, {"qkv.weight", {3 * d, d}}, {"qkv.bias", {3 * d}}, {"proj.weight", {d, d}},
             {"proj.bias", {d}}, {"ln2.weight", {d}}, {"ln2.bias", {d}}, {"fc.weight", {f, d}}, {"fc.bias", {f}},
             {"fc_proj.weight", {d, f}}, {"fc_proj.bias", {d}}})
      t[b + name] = {shape};
  }
  std::map<std::string, GlobalTensor> keyed;
  for (const auto& [name, g] : t) keyed["model/" + name] = g;
  return keyed;
}

// A committed one-rank checkpoint of step 20 holding the fused layout, as an earlier dtrain saved it.
std::string save_fused_checkpoint(const std::string& dir, const TransformerConfig& c) {
  CheckpointOptions options;
  options.dir = dir;
  CheckpointManager manager(options, 0, agree_alone());
  const auto tensors = fused_layout(c);
  return manager.save(
      20, 0, {true, ""},
      [&](const std::string& tmp) {
        std::vector<TensorChunk> chunks;
        for (const auto& [name, g] : tensors) chunks.push_back({name, whole_tensor(g.shape), at::zeros(g.shape)});
        write_shard_file(tmp, 0, chunks);
        const json state = {{"step", 20},          {"data_position", {{"epoch", 0}, {"samples", 0}}},
                            {"skipped_steps", 0},  {"tokens_seen", 0},
                            {"lr_scale", 1.0},     {"rollbacks", 0}};
        write_file_atomically(tmp + "/" + kTrainerStateFile, state.dump(2));
      },
      [&](const std::string& tmp) { write_checkpoint_index(tmp, tensors, {{"model_config", to_json(c)}}); });
}

const std::string kEarlierDtrain =
    "/index.json holds parameter 'blocks.0.qkv.weight': it was saved by an earlier dtrain, whose blocks fused q, k and v into one "
    "qkv weight";

}  // namespace

TEST(EarlierCheckpoint, OneWithFusedQkvIsRefusedNamingTheTensorForTrainingAndGeneration) {
  const TransformerConfig c = model_preset("tiny");
  const std::string run_dir = scratch_dir("fused_qkv"), step_dir = save_fused_checkpoint(run_dir + "/ckpt", c);
  try {
    load_model(step_dir);
    ADD_FAILURE() << "the fused checkpoint loaded for generation";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), step_dir + kEarlierDtrain)) << e.what();
  }
  Transformer model(c, 1);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  FlatParameters flat(named);
  auto optimizer = make_flat_optimizer(json{{"type", "AdamW"}, {"params", json::object()}}, flat.data());
  const TrainingLayout layout = data_parallel_layout(c, model, flat, flat.data(), BucketShards(make_grad_buckets(flat.entries(), 4, 1 << 20), 1, 0),
                                                     0, {{"dp_replicate", 0, 1}, {"dp_shard", 0, 1}});
  try {
    load_training_state(step_dir, layout, *optimizer);
    ADD_FAILURE() << "the fused checkpoint loaded for training";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), step_dir + kEarlierDtrain)) << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot load it")) << e.what();
  }
  // From the command line, generation says why the checkpoint cannot be used.
  const auto r = run_process({DTRAIN_BIN, "generate", "--checkpoint", step_dir, "--prompt", "Hi"}, 60);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "holds parameter 'blocks.0.qkv.weight': it was saved by an earlier dtrain")) << r.output;
  // A run that would resume it passes over it with the reason, and stops rather than start over beside it.
  const TrainingRun run = train(run_dir, 1, {});
  EXPECT_NE(run.result.exit_code, 0) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, step_dir + kEarlierDtrain)) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "can be resumed (warnings above say why)")) << run.result.output;
}

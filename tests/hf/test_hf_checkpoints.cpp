// Hugging Face checkpoints in and out (hf/): the tiny GPT-2 and Llama (grouped-query) models under
// tests/data/hf, made by transformers (their README says how), give through dtrain's import the
// logits transformers computed for them; a run started from one with model.init_from trains under
// ZeRO-3 x tp 2 like on one rank; `dtrain export` of its checkpoint imports back to the same
// tensors, bit for bit; and every bad input is refused by name before any work.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "ckpt/safetensors.h"
#include "hf/hf_checkpoint_reader.h"
#include "train/layout_legs.h"
#include "launch/worker_process.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(DTRAIN_SOURCE_DIR) + "/tests/data/hf";
const std::string kGpt2Dir = kFixtures + "/gpt2";
const std::string kLlamaDir = kFixtures + "/llama-gqa";  // sharded: three files and an index

// dtrain's model of `dir`, every parameter read whole through the import's reader.
Transformer import_model(const std::string& dir) {
  const TransformerConfig config = read_hf_model_shape(dir).config;
  HfCheckpointReader hf(dir, config);
  Transformer model(config, 0);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) hf.read(p.key(), whole_tensor(p.value().sizes().vec()), p.value().view({-1}));
  return model;
}

// fp32 logits of the same weights computed by two implementations (eager attention in transformers,
// dtrain's fused kernels): the sums run in other orders, a few ulps of values of order 1-10 through
// two blocks. Measured: 8.3e-7 (GPT-2) and 1.5e-6 (Llama). A misplaced, untransposed or mis-fused tensor moves them by 0.1 and more.
constexpr double kLogitsAtol = 1e-4;

void expect_transformers_logits(const std::string& dir) {
  const SafetensorsFile expected = read_safetensors(dir + "/logits.safetensors");
  Transformer model = import_model(dir);
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor logits = model->forward(expected.tensors.at("input_ids"));
  const at::Tensor reference = expected.tensors.at("logits");
  ASSERT_EQ(logits.sizes(), reference.sizes());
  const double diff = (logits - reference).abs().max().item<double>();
  EXPECT_LE(diff, kLogitsAtol) << dir << ": dtrain's logits differ from transformers' by up to " << diff;
}

std::string copy_fixture(const std::string& from, const std::string& name) {
  const std::string dir = scratch_dir(name);
  fs::copy(from, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dir;
}

void edit_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json config = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  edit(config);
  write_file_atomically(dir + "/config.json", config.dump(2));
}

ProcessResult run_dtrain(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {DTRAIN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, 120, {"OMP_NUM_THREADS=1"});
}

void expect_refused(const ProcessResult& r, const std::string& says) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, says)) << "expected '" << says << "' in:\n" << r.output;
}

// Every parameter of `checkpoint` read back from the Hugging Face directory `hf`.
std::map<std::string, at::Tensor> imported_parameters(const std::string& hf, const std::map<std::string, at::Tensor>& like) {
  HfCheckpointReader reader(hf, read_hf_model_shape(hf).config);
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : like) {
    at::Tensor got = at::empty_like(t);
    reader.read(name, whole_tensor(t.sizes().vec()), got.view({-1}));
    out[name] = got;
  }
  return out;
}

const Sets kFineTune = {"train.steps=4", "train_batch_size=8", "train_micro_batch_size_per_gpu=2", "gradient_accumulation_steps=auto"};

}  // namespace

TEST(HfImport, Gpt2GivesTheLogitsTransformersComputes) { expect_transformers_logits(kGpt2Dir); }

TEST(HfImport, ShardedLlamaWithGroupedQueryHeadsGivesTheLogitsTransformersComputes) { expect_transformers_logits(kLlamaDir); }

// The fine-tune of the imported Llama under ZeRO-3 over dp 2 x tp 2, each rank reading its slices,
// trains like the same fine-tune on one rank (the suite's fp32 bounds of another summation order).
TEST(HfImport, FineTuneUnderZero3AndTp2TrainsLikeOneRank) {
  const Sets job = kFineTune + Sets{"model.init_from=" + kLlamaDir};
  const TrainingRun one = train(scratch_dir("hf_finetune_one"), 1, job);
  ASSERT_EQ(one.result.exit_code, 0) << one.result.output;
  EXPECT_TRUE(contains(one.result.output, "model.init_from: loaded " + kLlamaDir)) << one.result.output;
  const TrainingRun four = train(scratch_dir("hf_finetune_four"), 4, job + Sets{"parallel.tp=2", "zero_optimization.stage=3"});
  EXPECT_TRUE(contains(four.result.output, "ZeRO stage 3")) << four.result.output;
  expect_same_training(four, one, 4);
}

// A run's checkpoint exported and read back by the import: every tensor bit for bit, in one file
// (GPT-2: transposed and fused on the way) and in shards (Llama, with a small --max-shard-size).
TEST(HfExport, ExportThenImportGivesIdenticalTensors) {
  for (const auto& [from, shard_size] : {std::pair{kGpt2Dir, "5GB"}, std::pair{kLlamaDir, "40KB"}}) {
    const std::string name = fs::path(from).filename().string();
    const TrainingRun run = train(scratch_dir("hf_export_run_" + name), 1, {"train.steps=2", "model.init_from=" + from});
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    const std::string out = scratch_dir("hf_export_" + name) + "/model";
    const ProcessResult e = run_dtrain({"export", "--checkpoint", ckpt(run.dir, 2), "--format", "hf", "--out", out, "--max-shard-size", shard_size});
    ASSERT_EQ(e.exit_code, 0) << e.output;
    EXPECT_EQ(fs::exists(out + "/" + kHfWeightsIndexFile), name == "llama-gqa") << e.output;
    EXPECT_TRUE(fs::exists(out + "/generation_config.json"));
    const auto trained = final_parameters(run, 2);
    expect_same_parameters(imported_parameters(out, trained), trained);
    EXPECT_EQ(read_hf_model_shape(out).config.describe(), read_hf_model_shape(from).config.describe());
  }
}

// DeepSpeed's stage3_gather_16bit_weights_on_model_save: every save also exports, in the run's precision.
TEST(HfExport, EverySaveExportsWithDeepSpeedsGatherOnSave) {
  const TrainingRun run = train(scratch_dir("hf_gather_on_save"), 2,
                                {"train.steps=2", "model.init_from=" + kGpt2Dir, "zero_optimization.stage=3", "bf16.enabled=true",
                                 "zero_optimization.stage3_gather_16bit_weights_on_model_save=true"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const std::string hf = ckpt(run.dir, 2) + "/hf";
  ASSERT_TRUE(fs::exists(hf + "/model.safetensors")) << run.result.output;
  for (const SafetensorsEntry& e : read_safetensors_header(hf + "/model.safetensors")) EXPECT_EQ(e.dtype, at::kBFloat16) << e.name;
  const auto trained = final_parameters(run, 2);
  const auto exported = imported_parameters(hf, trained);
  for (const auto& [name, t] : trained) EXPECT_TRUE(exported.at(name).equal(t.to(at::kBFloat16).to(at::kFloat))) << name;
}

// The tokenizer a run trained with goes along, under the name Hugging Face gives it: a SentencePiece
// model as tokenizer.model, byte for byte.
TEST(HfExport, TheRunsTokenizerGoesAlong) {
  const std::string tokenizers = std::string(DTRAIN_SOURCE_DIR) + "/tests/data/tokenizers/";
  const TrainingRun run = train(scratch_dir("hf_export_tokenizer_run"), 1,
                                {"train.steps=1", "data.source=text:" + tokenizers + "corpus.txt",
                                 "data.tokenizer=" + tokenizers + "sentencepiece.model", "model.vocab_size=600", "model.seq_len=32"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const std::string out = scratch_dir("hf_export_tokenizer") + "/model";
  const ProcessResult e = run_dtrain({"export", "--checkpoint", ckpt(run.dir, 1), "--format", "hf", "--out", out});
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  ASSERT_TRUE(fs::exists(out + "/tokenizer.model")) << e.output;
  EXPECT_EQ(bytes(out + "/tokenizer.model"), bytes(tokenizers + "sentencepiece.model"));
  EXPECT_FALSE(fs::exists(out + "/tokenizer.json"));
}

TEST(HfExport, RefusesBadInputWithoutWritingAnything) {
  const std::string dir = scratch_dir("hf_export_refusals");
  const std::string out = dir + "/out";
  expect_refused(run_dtrain({"export", "--checkpoint", kGpt2Dir, "--format", "hf", "--out", out}), "no intact checkpoint");
  const TrainingRun run = train(dir + "/run", 1, {"train.steps=1"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const std::string step = ckpt(run.dir, 1);
  expect_refused(run_dtrain({"export", "--checkpoint", step, "--format", "onnx", "--out", out}), "--format must be hf");
  expect_refused(run_dtrain({"export", "--checkpoint", step, "--format", "hf", "--out", out, "--dtype", "fp8"}), "--dtype must be fp32, bf16 or fp16");
  expect_refused(run_dtrain({"export", "--checkpoint", step, "--format", "hf", "--out", out, "--max-shard-size", "5 parsecs"}),
                 "--max-shard-size must be");
  EXPECT_FALSE(fs::exists(out));
  fs::create_directories(out);
  write_file_atomically(out + "/notes.txt", "mine");
  expect_refused(run_dtrain({"export", "--checkpoint", step, "--format", "hf", "--out", out}), "exists and is not an empty directory");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2) << "a temporary directory was left";
}

TEST(HfImport, RefusesBadInputByNameBeforeAnyWork) {
  const std::string bert = copy_fixture(kGpt2Dir, "hf_bert");
  edit_config(bert, [](nlohmann::json& c) { c["model_type"] = "bert"; });
  const std::string missing = copy_fixture(kLlamaDir, "hf_missing_shard");
  fs::remove(missing + "/model-00002-of-00003.safetensors");
  const std::string narrow = copy_fixture(kLlamaDir, "hf_shape");
  edit_config(narrow, [](nlohmann::json& c) { c["intermediate_size"] = 48; });
  const std::string run_dir = scratch_dir("hf_refusals_run");
  const std::vector<std::pair<Sets, std::string>> cases = {
      {{"model.init_from=" + bert}, "model_type \"bert\" is not supported"},
      {{"model.init_from=" + missing}, "names the shard 'model-00002-of-00003.safetensors'"},
      {{"model.init_from=" + narrow}, "has shape [64, 32], but the model of " + narrow + "/config.json needs [48, 32]"},
      {{"model.init_from=" + kLlamaDir, "model.n_layer=3"}, "'model.n_layer' is 3, but model.init_from's"},
      {{"model.init_from=" + kGpt2Dir, "model.seq_len=64"}, "n_positions is 32, fewer than model.seq_len 64"},
  };
  for (const auto& [sets, says] : cases) {
    const TrainingRun r = train(run_dir, 1, sets);
    EXPECT_EQ(r.result.exit_code, kRefusedInputExitCode) << r.result.output;
    EXPECT_TRUE(contains(r.result.output, says)) << "expected '" << says << "' in:\n" << r.result.output;
    EXPECT_TRUE(r.steps.empty());
  }
}

}  // namespace dtrain::test

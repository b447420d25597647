// What a run may do with what earlier runs left in its directories (train/run_start.h): which
// checkpoints it continues and prunes, what a restart resumes, which run directories it may write
// into, and the global batch a resume at another data-parallel size keeps. Each test reproduces a
// way a run lost or silently changed a user's work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint_manager.h"
#include "ckpt/durable_file.h"
#include "model/transformer_config.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/resume_choice.h"
#include "equivalence.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> checkpoint_names(const std::string& ckpt_dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpt_dir))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// A fresh run (train.resume=never) in a checkpoint directory holding an older run's higher steps
// used to prune its own new checkpoints right after saving them and exit 0.
TEST(StartRules, AFreshRunRefusesACheckpointDirectoryHoldingCheckpointsUnlessToldToStartOver) {
  const std::string old_run = scratch_dir("rules_old"), dir = scratch_dir("rules_fresh");
  ASSERT_EQ(train(old_run, 1, {"train.steps=8", "checkpoint.every_steps=4"}).result.exit_code, 0);
  fs::copy(old_run + "/ckpt", dir + "/ckpt", fs::copy_options::recursive);
  const std::vector<std::string> job = {"train.resume=never", "train.steps=4", "checkpoint.every_steps=1"};

  const TrainingRun refused = train(dir, 1, job);
  EXPECT_NE(refused.result.exit_code, 0);
  EXPECT_TRUE(contains(refused.result.output, "checkpoint.dir: '" + dir + "/ckpt' holds checkpoints beyond step 0, where this run starts "
                                              "(train.resume=never): step-00000004, step-00000008")) << refused.result.output;
  EXPECT_TRUE(contains(refused.result.output, "train.start_over=true")) << refused.result.output;
  EXPECT_EQ(checkpoint_names(dir + "/ckpt"), (std::vector<std::string>{"step-00000004", "step-00000008"}));
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl")) << "a refused run wrote into the run directory";

  std::vector<std::string> over = job;
  over.push_back("train.start_over=true");
  const TrainingRun fresh = train(dir, 1, over);
  ASSERT_EQ(fresh.result.exit_code, 0) << fresh.result.output;
  EXPECT_TRUE(contains(fresh.result.output, "train.start_over: removed 2 checkpoint(s) beyond step 0")) << fresh.result.output;
  // keep=2: the run's own newest two, and `latest` names the last of them.
  EXPECT_EQ(checkpoint_names(dir + "/ckpt"), (std::vector<std::string>{"step-00000003", "step-00000004"}));
  EXPECT_EQ(read_text_file(dir + "/ckpt/latest"), "step-00000004\n");
  EXPECT_EQ(fresh.steps.size(), 4u);
}

// A refused first start exited like any failure, so `--max-restarts` started the job again, and a
// restart, taking train.resume to apply to the first start only, resumed the very checkpoints the
// first start had refused to run beside. A refused configuration is final: nothing is restarted.
TEST(StartRules, ARefusedStartIsNotRestartedIntoWhatItRefused) {
  const std::string old_run = scratch_dir("rules_old_restart"), dir = scratch_dir("rules_refused_restart");
  ASSERT_EQ(train(old_run, 1, {"train.steps=4", "checkpoint.every_steps=4"}).result.exit_code, 0);
  fs::copy(old_run + "/ckpt", dir + "/ckpt", fs::copy_options::recursive);
  for (const int nproc : {1, 2}) {
    const TrainingRun refused = train(dir, nproc, {"train.resume=never", "train.steps=8"}, {"--max-restarts", "2"});
    EXPECT_NE(refused.result.exit_code, 0) << refused.result.output;
    EXPECT_TRUE(contains(refused.result.output, "holds checkpoints beyond step 0")) << refused.result.output;
    EXPECT_TRUE(contains(refused.result.output, "not restarting: rank ")) << refused.result.output;
    EXPECT_FALSE(contains(refused.result.output, "restarting the job")) << refused.result.output;
    EXPECT_EQ(checkpoint_names(dir + "/ckpt"), (std::vector<std::string>{"step-00000004"}));
    EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl")) << "a refused run wrote into the run directory";
  }
}

// An explicit train.resume from the middle of a line of checkpoints used to delete the new
// checkpoint of the next step right after saving it (the later ones were "newer").
TEST(StartRules, ResumingFromTheMiddleRefusesTheLaterCheckpointsThenBranchesCleanly) {
  const std::string dir = scratch_dir("rules_branch");
  ASSERT_EQ(train(dir, 1, {"train.steps=8", "checkpoint.every_steps=2", "checkpoint.keep=0"}).result.exit_code, 0);
  const std::vector<std::string> job = {"train.resume=" + ckpt(dir, 4), "train.steps=8", "checkpoint.every_steps=2", "checkpoint.keep=2"};

  const TrainingRun refused = train(dir, 1, job);
  EXPECT_NE(refused.result.exit_code, 0);
  EXPECT_TRUE(contains(refused.result.output, "holds checkpoints beyond step 4, where this run starts (train.resume=" + ckpt(dir, 4) +
                                                  "): step-00000006, step-00000008")) << refused.result.output;
  EXPECT_EQ(checkpoint_names(dir + "/ckpt").size(), 4u);

  std::vector<std::string> over = job;
  over.front() += "/";  // as a shell completes it: the same checkpoint, and the same lineage
  over.push_back("train.start_over=true");
  const TrainingRun branch = train(dir, 1, over);
  ASSERT_EQ(branch.result.exit_code, 0) << branch.result.output;
  EXPECT_TRUE(contains(branch.result.output, "resumed from " + ckpt(dir, 4) + " at step 4")) << branch.result.output;
  // The branch continues the lineage of step 4 and prunes it and its predecessors down to keep=2.
  EXPECT_EQ(checkpoint_names(dir + "/ckpt"), (std::vector<std::string>{"step-00000006", "step-00000008"}));
  EXPECT_EQ(CheckpointManager::read_manifest(ckpt(dir, 8)).step, 8);
  ASSERT_EQ(branch.steps.size(), 8u);  // metrics.jsonl holds each step once
  for (int i = 0; i < 8; ++i) EXPECT_EQ(branch.steps[size_t(i)]["step"].get<int>(), i + 1);
}

// A restart used to resume the explicit train.resume again, redoing every step since.
TEST(StartRules, ARestartResumesTheJobsNewestCheckpointNotTheExplicitPathAgain) {
  const std::string source = scratch_dir("rules_source"), dir = scratch_dir("rules_restart");
  ASSERT_EQ(train(source, 1, {"train.steps=2"}).result.exit_code, 0);
  // Rank 0 of the first attempt dies after step 7; step 6 is the job's newest checkpoint then.
  const TrainingRun run = train(dir, 1, {"train.resume=" + ckpt(source, 2), "train.steps=8", "checkpoint.every_steps=2"},
                                {"--max-restarts", "1"}, {"DTRAIN_CRASH_AT=step:7:0:0"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "restarting the job (restart 1 of 1)")) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "restart 1: resuming the newest checkpoint this job wrote")) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "resumed from " + ckpt(dir, 6) + " at step 6")) << run.result.output;
  ASSERT_EQ(run.steps.size(), 6u);  // steps 3..8, each once
  EXPECT_EQ(run.steps.front()["step"].get<int>(), 3);
}

// train.run_dir set to the config file's own folder used to overwrite the user's config.json and
// append to another run's metrics and logs.
TEST(StartRules, ARunNeverWritesOverItsConfigNorIntoAnotherRunsDirectory) {
  const std::string dir = scratch_dir("rules_input");
  const std::string config = dir + "/config.json", original = R"({"model": {"preset": "tiny"}, "train": {"steps": 2}})";
  {
    std::ofstream(config) << original;
  }
  const ProcessResult input = run_process({DTRAIN_BIN, "run", "--nproc-per-node", "1", "--no-sample", "--config", config, "--set",
                                           "train.run_dir=" + dir},
                                          180, {"OMP_NUM_THREADS=1"});
  EXPECT_NE(input.exit_code, 0);
  EXPECT_TRUE(contains(input.output, "--config '" + config + "' is the run directory's config.json")) << input.output;
  EXPECT_EQ(read_text_file(config), original);
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl"));

  // A finished run without checkpoints leaves files, and nothing to resume.
  const std::string used = scratch_dir("rules_used");
  ASSERT_EQ(train(used, 1, {"train.steps=3", "checkpoint.save_at_end=false"}).result.exit_code, 0);
  const std::string metrics = read_text_file(used + "/metrics.jsonl");
  const TrainingRun second = train(used, 1, {"train.steps=2", "checkpoint.save_at_end=false"});
  EXPECT_NE(second.result.exit_code, 0);
  EXPECT_TRUE(contains(second.result.output, "train.run_dir: '" + used + "' already holds another run's files (config.json, "
                                             "metrics.jsonl, rank-0.log) and this run does not resume it")) << second.result.output;
  EXPECT_EQ(read_text_file(used + "/metrics.jsonl"), metrics);
  const TrainingRun over = train(used, 1, {"train.steps=2", "checkpoint.save_at_end=false", "train.start_over=true"});
  ASSERT_EQ(over.result.exit_code, 0) << over.result.output;
  EXPECT_EQ(over.steps.size(), 2u) << "the earlier run's metrics were kept beside the new ones";
}

// The docs' own example: a run stopped on 4 ranks resumes on 2. The global batch is part of the
// training state, so the resumed run keeps it (accumulation 2) and trains like the uninterrupted
// 4-rank run, within the fp32 tolerance of another summation order (equivalence.h).
TEST(StartRules, AResumeAtAnotherDataParallelSizeKeepsTheGlobalBatch) {
  const std::string dir = scratch_dir("rules_batch");
  const std::vector<std::string> job = {"train.steps=6", "train_micro_batch_size_per_gpu=2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), job.begin(), job.end());
    return extra;
  };
  ASSERT_EQ(train(dir, 4, with({"train.stop_at_step=3"})).result.exit_code, 0);
  const TrainingRun resumed = train(dir, 2, job);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_TRUE(contains(resumed.result.output, "was trained with a global batch of 8: kept on 2 data-parallel rank(s) as micro-batch 2 x "
                                              "accumulation 2")) << resumed.result.output;
  const TrainingRun straight = train(scratch_dir("rules_batch_straight"), 4, job);
  expect_same_training(straight, resumed, 6);

  // 3 ranks cannot make a batch of 8: under elastic.batch_policy=fail, refused with the ways out,
  // before any step (the default takes the nearest batch: test_elastic_batch.cpp).
  const TrainingRun odd = train(dir, 3, with({"train.steps=8", "elastic.batch_policy=fail"}));
  EXPECT_NE(odd.result.exit_code, 0);
  EXPECT_TRUE(contains(odd.result.output, "run on a number of data-parallel ranks that divides it (1, 2, 4, 8), set elastic.batch_policy=keep "
                                          "to take the nearest batch these ranks can make, or set train_batch_size=6")) << odd.result.output;
}

// A resume under another schedule jumps to another learning-rate curve: said once, with both rates.
TEST(StartRules, AResumeThatChangesTheScheduleIsWarned) {
  const std::string dir = scratch_dir("rules_schedule");
  ASSERT_EQ(train(dir, 1, {"train.steps=4", "train.stop_at_step=2"}).result.exit_code, 0);
  const TrainingRun longer = train(dir, 1, {"train.steps=8"});
  ASSERT_EQ(longer.result.exit_code, 0) << longer.result.output;
  EXPECT_TRUE(contains(longer.result.output, "this run's learning-rate schedule differs from the one " + ckpt(dir, 2) +
                                                 " was trained with (train.steps 4 -> 8): at step 3 the learning rate is")) << longer.result.output;
  // A rate given on one side only (the checkpoint's config sets optimizer.params.lr, this one leaves the
  // default) used to end the resume on a missing key.
  const std::string unset = scratch_dir("rules_schedule_lr");
  ASSERT_EQ(train(unset, 1, {"train.stop_at_step=2"}).result.exit_code, 0);
  const TrainingRun by_default = train(unset, 1, {"optimizer.params={\"weight_decay\":0.1,\"eps\":1e-6}"});
  ASSERT_EQ(by_default.result.exit_code, 0) << by_default.result.output;
  EXPECT_TRUE(contains(by_default.result.output, "(optimizer learning rate 2.00e-03 -> ")) << by_default.result.output;
}

// A resume in another shuffle order continues the epoch along another permutation: said once, with
// the key that keeps the checkpoint's order. A resume in the checkpoint's own order says nothing.
TEST(StartRules, AResumeInAnotherShuffleOrderIsWarned) {
  const std::string dir = scratch_dir("rules_order");
  ASSERT_EQ(train(dir, 1, {"train.steps=6", "train.stop_at_step=2"}).result.exit_code, 0);
  const TrainingRun hashed = train(dir, 1, {"train.steps=6", "train.stop_at_step=4", "data.shuffle_order=hashed"});
  ASSERT_EQ(hashed.result.exit_code, 0) << hashed.result.output;
  EXPECT_TRUE(contains(hashed.result.output, ckpt(dir, 2) + " was trained in the randperm shuffle order and this run shuffles in the "
                                                 "hashed order (data.shuffle_order): the rest of epoch 0 follows another permutation")) << hashed.result.output;
  const TrainingRun same = train(dir, 1, {"train.steps=6", "data.shuffle_order=hashed"});
  ASSERT_EQ(same.result.exit_code, 0) << same.result.output;
  EXPECT_FALSE(contains(same.result.output, "shuffle order")) << same.result.output;
  EXPECT_FALSE(contains(same.result.output, "model settings")) << same.result.output;
}

// A model key that changes no tensor's shape (a norm's epsilon, the order of an image's tokens)
// loads into any run, which then continues the weights under other settings: said once, key by key.
TEST(StartRules, AResumeThatChangesTheModelsSettingsIsWarned) {
  const std::string dir = scratch_dir("rules_model");
  ASSERT_EQ(train(dir, 1, {"train.steps=4", "train.stop_at_step=2"}).result.exit_code, 0);
  const TrainingRun other = train(dir, 1, {"train.steps=4", "model.norm_eps=1e-6"});
  ASSERT_EQ(other.result.exit_code, 0) << other.result.output;
  EXPECT_TRUE(contains(other.result.output, "this run's model settings differ from those " + ckpt(dir, 2) +
                                                " was trained with (model.norm_eps 1e-05 -> 1e-06): its weights continue under this run's"))
      << other.result.output;
}

// A checkpoint of the OCR preset saved before model.vision.token_order existed was trained in rows;
// the preset now reads columns, which a resume must not take up without a word.
TEST(StartRules, ACheckpointFromBeforeTheTokenOrderKeyWasTrainedInRows) {
  const TransformerConfig ocr = model_preset("vlm-ocr");
  nlohmann::json saved = to_json(ocr);
  saved["vision"].erase("token_order");
  EXPECT_EQ(model_changes(saved, ocr), (std::vector<std::string>{"model.vision.token_order \"rows\" -> \"columns\""}));
  saved["vision"]["token_order"] = "columns";
  EXPECT_TRUE(model_changes(saved, ocr).empty());
}

}  // namespace dtrain::test

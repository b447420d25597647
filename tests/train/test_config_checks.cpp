// What `dtrain config check` promises: it refuses every config `dtrain run` would refuse, checks
// every key's type and range, lists no key docs/config.md leaves out, leaves no "auto" unresolved,
// and warns, as the run does, about what runs but is questionable.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "comm/world.h"
#include "support/process.h"
#include "support/scratch.h"
#include "train/config_schema.h"
#include "train/train_config.h"
#include "training_run.h"

using namespace dtrain;
using dtrain::test::contains;
using dtrain::test::run_process;
using dtrain::test::scratch_dir;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

dtrain::test::ProcessResult config_check(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {DTRAIN_BIN, "config", "check"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, 60);
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// Every key of the defaults that takes a value, found here rather than asked of the schema, so
// that a key added to it is covered without anyone listing it.
void value_keys_of(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it.value().is_object() && !is_free_form(key)) value_keys_of(it.value(), key, out);
    else out.push_back(key);
  }
}

std::vector<std::string> schema_value_keys() {
  std::vector<std::string> keys;
  value_keys_of(config_defaults(), "", keys);
  return keys;
}

std::string error_of_sets(const std::vector<std::string>& sets, int world = 1) {
  try {
    json user = json::object();
    apply_overrides(user, sets);
    resolve_config(user, world, "cfg.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// Where "auto" is left in `j`, as dotted keys.
void autos_in(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it.value().is_object()) autos_in(it.value(), key, out);
    else if (it.value() == "auto") out.push_back(key);
  }
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

// Issue 24, item 14: each of these passed `config check` and failed only inside the ranks after launch.
TEST(ConfigCheck, RefusesEveryConfigThatRunWouldRefuseInsideTheRanks) {
  const std::string dir = scratch_dir("config_check_refuses");
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"data.source=s3://bucket/corpus"}, "data.source: \"s3://bucket/corpus\" is not one of \"builtin\", \"text:PATH\", \"bin:GLOB\""},
      {{"data.source=bin:" + dir + "/shard-*.bin"}, "data.source: no token shard matches '" + dir + "/shard-*.bin'"},
      {{"data.source=text:" + dir + "/missing.txt"}, "data.source: text file '" + dir + "/missing.txt' "},
      {{"train.freeze=[\"blocks.0.*\", \"block.1.*\"]"}, "train.freeze: 'block.1.*' matches no parameter"},
      {{"zero_optimization.stage=1", "zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" + dir + "/nvme\"}"},
       "zero_optimization.offload_optimizer.nvme_path: '" + dir + "/nvme' does not exist"},
      {{"train.resume=" + dir + "/ckpt/step-00000100"}, "train.resume: '" + dir + "/ckpt/step-00000100' does not exist"},
  };
  if (!backend_missing_from_build("nccl").empty())
    cases.push_back({{"dist.backend=nccl"}, "dist.backend=nccl, but this build of dtrain has no NCCL"});
  for (const auto& [sets, expected] : cases) {
    std::vector<std::string> args = {"--set", "model.preset=tiny"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    const auto r = config_check(args);
    EXPECT_EQ(r.exit_code, 2) << sets.back() << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, expected)) << r.output;
  }
  // What the checks accept still passes: globs that match, a directory to resume from.
  fs::create_directories(dir + "/ckpt");
  const auto fine = config_check({"--set", "model.preset=tiny", "--set", "train.freeze=[\"blocks.0.*\", \"wte.*\"]", "--set",
                                  "train.resume=" + dir + "/ckpt"});
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
}

// The same check stops `dtrain run` before it launches a rank.
TEST(ConfigCheck, RunRefusesTheSameConfigBeforeLaunchingAnyRank) {
  const std::string dir = scratch_dir("run_refuses");
  const auto r = run_process({DTRAIN_BIN, "run", "--no-sample", "--nproc-per-node", "1", "--set", "model.preset=tiny", "--set",
                              "train.run_dir=" + dir + "/run", "--set", "data.source=bin:" + dir + "/none-*.bin"},
                             60, {"OMP_NUM_THREADS=1"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "data.source: no token shard matches '" + dir + "/none-*.bin'")) << r.output;
  EXPECT_FALSE(contains(r.output, "dtrain launch")) << "a rank was launched:\n" << r.output;
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

// Issue 24, item 15: every key the schema accepts refuses a value of no type it takes, naming itself.
TEST(TrainConfig, EveryKeyRefusesAValueOfTheWrongTypeByName) {
  for (const auto& key : schema_value_keys()) {
    const std::string msg = error_of_sets({key + "=[[]]"});
    EXPECT_TRUE(contains(msg, "'" + key + "'") || contains(msg, key + " ")) << key << ": " << msg;
  }
}

TEST(TrainConfig, DeepSpeedKeysDtrainDoesNotUseAreCheckedAllTheSame) {
  EXPECT_EQ(error_of_sets({"zero_optimization.overlap_comm=maybe"}),
            "cfg.json: 'zero_optimization.overlap_comm' must be true or false, got \"maybe\"");
  EXPECT_EQ(error_of_sets({"zero_optimization.allgather_bucket_size=-5"}),
            "cfg.json: 'zero_optimization.allgather_bucket_size' must be at least 1, got -5");
  EXPECT_EQ(error_of_sets({"zero_optimization.stage3_max_live_parameters=lots"}),
            "cfg.json: 'zero_optimization.stage3_max_live_parameters' must be a whole number, got \"lots\"");
  EXPECT_EQ(error_of_sets({"zero_optimization.round_robin_gradients=3"}),
            "cfg.json: 'zero_optimization.round_robin_gradients' must be true or false, got 3");
  EXPECT_EQ(error_of_sets({"activation_checkpointing.profile=7"}),
            "cfg.json: 'activation_checkpointing.profile' must be true or false, got 7");
  EXPECT_EQ(error_of_sets({"zero_optimization.stage3_prefetch_bucket_size=lots"}),
            "cfg.json: 'zero_optimization.stage3_prefetch_bucket_size' must be \"auto\" or a whole number at least 0, got \"lots\"");
  EXPECT_EQ(error_of_sets({"zero_optimization.offload_param.ratio=2"}),
            "cfg.json: 'zero_optimization.offload_param.ratio' must be between 0 and 1, got 2");
  EXPECT_EQ(error_of_sets({"optimizer.params={\"nesterov\": \"yes\"}", "optimizer.type=SGD"}),
            "cfg.json: optimizer.params.nesterov must be true or false, got \"yes\"");
  EXPECT_EQ(error_of_sets({"checkpoint.async=yes"}), "cfg.json: 'checkpoint.async' must be true or false, got \"yes\"");
  EXPECT_EQ(error_of_sets({"checkpoint.async=true", "zero_optimization.overlap_comm=false"}), "(no error)");
  EXPECT_EQ(error_of_sets({"data.shuffle_order=random"}),
            "cfg.json: 'data.shuffle_order' must be \"auto\", \"randperm\" or \"hashed\", got \"random\"");
  EXPECT_EQ(error_of_sets({"data.shuffle_order=hashed"}), "(no error)");
}

// Every key the code accepts is in docs/config.md's key tables, and every key there is accepted.
TEST(ConfigDocs, TheKeyTablesListEveryKeyTheSchemaAccepts) {
  std::ifstream doc(std::string(DTRAIN_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;
  bool in_key_table = false;
  const std::regex backticked("`([^`]+)`");
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| key |", 0) == 0) {
      in_key_table = true;
      continue;
    }
    if (line.rfind("|", 0) != 0) {
      in_key_table = false;
      continue;
    }
    if (!in_key_table || line.rfind("|---", 0) == 0) continue;
    const std::string first_cell = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(first_cell.begin(), first_cell.end(), backticked), end; it != end; ++it)
      documented.insert((*it)[1]);
  }
  const std::vector<std::string> keys = schema_value_keys();
  const std::set<std::string> accepted(keys.begin(), keys.end());
  for (const auto& key : accepted) EXPECT_TRUE(documented.count(key)) << key << " is accepted but docs/config.md does not list it";
  for (const auto& key : documented) EXPECT_TRUE(accepted.count(key)) << key << " is in docs/config.md but not accepted";
}

// The resolved config says what a run uses: "auto" is left only where the nodes a run starts on
// decide (the backend, a hybrid shard group per node, the memory a rank may fill), the checkpoints it
// finds (train.resume), the corpus it reads (data.shuffle_order) or each rank's shard (NVMe offload's
// sub-groups), which the run's own config.json resolves (below) or its log gives.
TEST(TrainConfig, TheResolvedConfigLeavesNoAutoThatItCanResolve) {
  const std::set<std::string> decided_at_start = {"dist.backend", "train.resume", "parallel.fsdp.shard_group_size",
                                                  "data.shuffle_order", "train.memory_budget", "zero_optimization.sub_group_size"};
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {}, {"zero_optimization.stage=3"}, {"parallel.fsdp.sharding_strategy=hybrid_shard"}, {"train_batch_size=32"}}) {
    json user = json::object();
    apply_overrides(user, sets);
    const TrainConfig c = resolve_config(user, 2, "cfg.json");
    std::vector<std::string> autos;
    autos_in(c.json, "", autos);
    for (const auto& key : autos) EXPECT_TRUE(decided_at_start.count(key)) << key << " is left \"auto\"";
    // Resolved, the config reads back as itself: config.json can be passed as a config.
    EXPECT_EQ(resolve_config(c.json, 2, "config.json").json, c.json);
  }
  json stage3 = json::object();
  apply_overrides(stage3, {"zero_optimization.stage=3", "model.preset=tiny"});
  const TrainConfig c = resolve_config(stage3, 1, "cfg.json");
  EXPECT_EQ(c.json["zero_optimization"]["stage3_prefetch_bucket_size"], c.model.largest_part_parameters());
  EXPECT_EQ(c.json["zero_optimization"]["stage3_param_persistence_threshold"], 0);
  EXPECT_EQ(c.json["parallel"]["micro_batches"], c.accumulation);
  EXPECT_EQ(c.json["parallel"]["fsdp"]["shard_group_size"], 1);
}

TEST(TrainConfig, TheRunDirectorysConfigJsonLeavesNoAuto) {
  const std::string dir = scratch_dir("config_no_auto") + "/run";
  const auto run = dtrain::test::train(dir, 2, {"parallel.fsdp.sharding_strategy=hybrid_shard", "train.steps=2"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  std::ifstream file(dir + "/config.json");
  const json written = json::parse(file);
  std::vector<std::string> autos;
  autos_in(written, "", autos);
  // Except NVMe offload's sub-groups, sized from each rank's own shard (pipeline stages hold shards
  // of different sizes), which the log gives.
  EXPECT_EQ(autos, std::vector<std::string>{"zero_optimization.sub_group_size"});
  EXPECT_GT(written["train"]["memory_budget"].get<int64_t>(), 0);
  EXPECT_EQ(written["dist"]["backend"], "shm");
  EXPECT_EQ(written["train"]["resume"], "never");
  EXPECT_EQ(written["parallel"]["fsdp"]["shard_group_size"], 2);  // the node's ranks
  EXPECT_EQ(written["data"]["shuffle_order"], "randperm");          // the built-in corpus is far below 2^23 samples
  EXPECT_NO_THROW(resolve_config(written, 2, "config.json"));
}

// Issue 24, item 16: a --set of optimizer.type used to fail on the old type's parameters.
TEST(ConfigCheck, SettingTheOptimizerTypeDropsTheParametersTheNewTypeLacks) {
  const std::string dir = scratch_dir("set_optimizer_type");
  const std::string cfg = write_file(dir + "/adam.json", R"({"model": {"preset": "tiny"},
    "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}})");
  const auto r = config_check({cfg, "--set", "optimizer.type=SGD"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: --set 'optimizer.type=SGD' dropped optimizer.params.betas and optimizer.params.eps, which SGD "
                                 "does not take"))
      << r.output;
  EXPECT_TRUE(contains(r.output, R"("optimizer": {
    "params": {
      "lr": 0.001,
      "weight_decay": 0.1
    },
    "type": "SGD")")) << r.output;
  // Parameters given after the type are the user's, and checked as such.
  const auto explicit_betas = config_check({cfg, "--set", "optimizer.type=SGD", "--set", "optimizer.params.betas=[0.9,0.9]"});
  EXPECT_TRUE(contains(explicit_betas.output, "optimizer.params.betas is not a parameter of this optimizer")) << explicit_betas.output;
  // The scheduler's type likewise.
  json user = {{"scheduler", {{"type", "cosine"}, {"params", {{"warmup_steps", 10}, {"min_ratio", 0.1}}}}}};
  const auto warnings = apply_overrides(user, {"scheduler.type=WarmupLR"});
  EXPECT_EQ(warnings, std::vector<std::string>{"--set 'scheduler.type=WarmupLR' dropped scheduler.params.min_ratio and "
                                               "scheduler.params.warmup_steps, which WarmupLR does not take"});
}

// Issue 24, item 17: what runs but is questionable is said once, by `config check` and by the run.
namespace {

const char* kQuestionable = R"({"model": {"preset": "tiny"}, "train": {"steps": 3, "eval_every": 0, "steps": 4},
  "scheduler": {"type": "cosine", "params": {"warmup_steps": 4}},
  "checkpoint": {"save_at_end": false, "every_steps": 10}})";

std::vector<std::string> questionable_warnings(const std::string& cfg) {
  return {cfg + "': 'train.steps' is given 2 times in one object; the last, 4, is used and the others are ignored",
          ": the cosine schedule warms up for 4 steps (scheduler.params.warmup_steps) and the run has 4 (train.steps): the learning "
          "rate never reaches the rate it warms up to",
          ": this run saves no checkpoint (checkpoint.save_at_end is false, checkpoint.every_steps (10) is past train.steps (4), "
          "checkpoint.every_hours is 0): a failure loses all of it, and nothing is left to resume or sample from"};
}

}  // namespace

TEST(ConfigCheck, QuestionableConfigsAreWarnedAboutByName) {
  const std::string dir = scratch_dir("config_warnings");
  const std::string cfg = write_file(dir + "/q.json", kQuestionable);
  const auto r = config_check({cfg});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& warning : questionable_warnings(cfg)) EXPECT_EQ(count_of(r.output, warning), 1u) << warning << "\n" << r.output;
  // Which value of a repeated key wins is the parser's: the last, at any depth.
  std::vector<std::string> warnings;
  const json nested = read_config_file(write_file(dir + "/nested.json", R"({"optimizer": {"params": {"lr": 1, "lr": 2, "lr": 3}}})"),
                                       &warnings);
  EXPECT_EQ(nested["optimizer"]["params"]["lr"], 3);
  EXPECT_EQ(warnings, std::vector<std::string>{"config file '" + dir +
                                               "/nested.json': 'optimizer.params.lr' is given 3 times in one object; the last, 3, "
                                               "is used and the others are ignored"});
  // A config without such things gets no warning.
  EXPECT_FALSE(contains(config_check({"--set", "model.preset=tiny"}).output, "warning:"));
}

TEST(ConfigCheck, TheRunSaysEachWarningOnceBeforeItsFirstStep) {
  const std::string dir = scratch_dir("run_warnings");
  const std::string cfg = write_file(dir + "/q.json", kQuestionable);
  const auto run = run_process({DTRAIN_BIN, "run", "--nproc-per-node", "2", "--no-sample", "--config", cfg, "--set",
                                "train.run_dir=" + dir + "/run", "--set", "train.peak_flops=1e9", "--set", "steps_per_print=1"},
                               120, {"OMP_NUM_THREADS=1"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string& out = run.output;
  for (const auto& warning : questionable_warnings(cfg)) {
    EXPECT_EQ(count_of(out, warning), 1u) << warning << "\n" << out;
    EXPECT_LT(out.find(warning), out.find("step 1/")) << out;
  }
}

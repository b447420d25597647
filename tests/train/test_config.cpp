#include <gtest/gtest.h>

#include <fstream>

#include "support/process.h"
#include "support/scratch.h"
#include "train/train_config.h"

using namespace dtrain;
using json = nlohmann::json;

namespace {

TrainConfig resolve(json user, int world = 1) { return resolve_config(user, world, "cfg.json"); }

std::string error_of(json user, int world = 1) {
  try {
    resolve(user, world);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(TrainConfig, BatchArithmeticDerivesTheMissingValue) {
  auto c = resolve({{"train_batch_size", 32}, {"train_micro_batch_size_per_gpu", 4}}, 4);
  EXPECT_EQ(c.accumulation, 2);
  c = resolve({{"train_batch_size", 32}, {"gradient_accumulation_steps", 2}}, 2);
  EXPECT_EQ(c.micro_batch, 8);
  c = resolve({{"train_micro_batch_size_per_gpu", 4}, {"gradient_accumulation_steps", 3}}, 2);
  EXPECT_EQ(c.global_batch, 24);
  c = resolve({{"train_batch_size", 16}}, 4);
  EXPECT_EQ(c.micro_batch, 4);
  EXPECT_EQ(c.accumulation, 1);
  c = resolve(json::object(), 2);
  EXPECT_EQ(c.global_batch, 16);
  EXPECT_EQ(c.json["train_batch_size"], 16);  // the resolved values replace "auto"
}

TEST(TrainConfig, InconsistentBatchArithmeticSaysWhichValuesDisagree) {
  const auto msg = error_of({{"train_batch_size", 16}, {"train_micro_batch_size_per_gpu", 8}, {"gradient_accumulation_steps", 1}}, 4);
  EXPECT_NE(msg.find("train_batch_size (16)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data-parallel size (4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("= 32"), std::string::npos) << msg;
  EXPECT_NE(error_of({{"train_batch_size", 10}, {"train_micro_batch_size_per_gpu", 4}}).find("not divisible"), std::string::npos);
}

TEST(TrainConfig, UnknownKeysAreErrorsWithTheNearestKnownKey) {
  auto msg = error_of({{"train", {{"stesp", 10}}}});
  EXPECT_NE(msg.find("cfg.json: unknown key 'train.stesp'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'train.steps'"), std::string::npos) << msg;
  msg = error_of({{"steps", 10}});
  EXPECT_NE(msg.find("'train.steps'"), std::string::npos) << msg;
  msg = error_of({{"model", {{"nlayer", 2}}}});
  EXPECT_NE(msg.find("'model.n_layer'"), std::string::npos) << msg;
}

TEST(TrainConfig, BothSixteenBitFormatsAtOnceAreRefusedByName) {
  EXPECT_EQ(error_of({{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}}),
            "cfg.json: 'fp16.enabled' and 'bf16.enabled' are both true; a run computes in one 16-bit format, so enable at most one");
}

TEST(TrainConfig, MixedPrecisionKeysResolveWithDeepSpeedsMeaning) {
  const TrainConfig bf16 = resolve({{"bf16", {{"enabled", true}}}, {"data_types", {{"grad_accum_dtype", "bf16"}}}});
  EXPECT_EQ(bf16.precision, at::kBFloat16);
  EXPECT_TRUE(bf16.grad_accum_16bit);
  const TrainConfig fp16 = resolve({{"fp16", {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 12}, {"loss_scale_window", 50},
                                              {"hysteresis", 3}, {"consecutive_hysteresis", true}, {"min_loss_scale", 0.5}}}});
  EXPECT_EQ(fp16.precision, at::kHalf);
  EXPECT_FALSE(fp16.grad_accum_16bit);  // fp32 unless asked
  EXPECT_EQ(fp16.loss_scaler.initial_scale_power, 12);
  EXPECT_EQ(fp16.loss_scaler.window, 50);
  EXPECT_EQ(fp16.loss_scaler.hysteresis, 3);
  EXPECT_TRUE(fp16.loss_scaler.consecutive_hysteresis);
  EXPECT_EQ(fp16.loss_scaler.min_scale, 0.5);
  EXPECT_EQ(resolve(json::object()).precision, at::kFloat);
}

TEST(TrainConfig, MixedPrecisionMistakesAreRefusedByName) {
  EXPECT_EQ(error_of({{"bf16", {{"enabled", true}}}, {"data_types", {{"grad_accum_dtype", "fp16"}}}}),
            "cfg.json: 'data_types.grad_accum_dtype' is \"fp16\" but the run computes in bf16; gradients accumulate in fp32 or in the "
            "run's own 16-bit type (set fp16.enabled=true, or remove the key)");
  EXPECT_EQ(error_of({{"data_types", {{"grad_accum_dtype", "int8"}}}}),
            "cfg.json: 'data_types.grad_accum_dtype' must be \"fp32\", \"bf16\" or \"fp16\", got \"int8\"");
  EXPECT_NE(error_of({{"fp16", {{"enabled", true}, {"auto_cast", true}}}}).find("'fp16.auto_cast'"), std::string::npos);
  EXPECT_EQ(error_of({{"fp16", {{"enabled", true}, {"min_loss_scale", 0}}}}), "cfg.json: 'fp16.min_loss_scale' must be above 0");
  EXPECT_NE(error_of({{"fp16", {{"enabled", true}, {"hysteresis", 0}}}}).find("'fp16.hysteresis'"), std::string::npos);
}

TEST(TrainConfig, CheckpointAsyncIsReadIntoTheCheckpointOptions) {
  EXPECT_FALSE(resolve(json::object()).checkpoint.async);
  EXPECT_TRUE(resolve({{"checkpoint", {{"async", true}}}}).checkpoint.async);
}

TEST(TrainConfig, TheMeshDimsResolveForTheWorldWithHybridShardingAsReplicasOfShardGroups) {
  const TrainConfig plain = resolve(json::object(), 4);
  EXPECT_EQ(plain.parallel.describe(), "pp 1 x dp_replicate 1 x dp_shard 4 x cp 1 x tp 1");
  EXPECT_EQ(plain.dp, 4);
  EXPECT_EQ(resolve({{"parallel", {{"dp", 4}}}}, 4).parallel.dp_shard, 4);
  EXPECT_EQ(error_of({{"parallel", {{"dp", 3}}}}, 4),
            "cfg.json: the parallel dims (parallel.pp, parallel.dp, parallel.cp, parallel.tp) span pp 1 x dp_replicate 1 x dp_shard 3 x "
            "cp 1 x tp 1 = 3 ranks, but the world size is 4");
  const json hybrid{{"parallel", {{"fsdp", {{"sharding_strategy", "hybrid_shard"}, {"shard_group_size", 2}}}}}};
  const TrainConfig groups_of_two = resolve(hybrid, 8);
  EXPECT_EQ(groups_of_two.parallel.dp_replicate, 4);
  EXPECT_EQ(groups_of_two.parallel.dp_shard, 2);
  EXPECT_EQ(groups_of_two.parallel.dp(), 8);
}

// A node's ranks are known when the run starts: the shard groups resolve then, or are refused.
TEST(TrainConfig, HybridShardGroupsOfANodeResolveForTheNodesRanks) {
  TrainConfig per_node = resolve({{"parallel", {{"fsdp", {{"sharding_strategy", "hybrid_shard"}}}}}}, 4);
  EXPECT_EQ(per_node.parallel.dp_shard, 4);  // until the node's ranks are known
  resolve_shard_group_per_node(per_node, 2);
  EXPECT_EQ(per_node.parallel.describe(), "pp 1 x dp_replicate 2 x dp_shard 2 x cp 1 x tp 1");
  EXPECT_EQ(per_node.json["parallel"]["fsdp"]["shard_group_size"], 2);
  TrainConfig uneven = resolve({{"parallel", {{"fsdp", {{"sharding_strategy", "hybrid_shard"}}}}}}, 4);
  try {
    resolve_shard_group_per_node(uneven, 3);
    ADD_FAILURE() << "accepted shard groups of 3 among 4 ranks";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "parallel.fsdp.shard_group_size: a node's 3 rank(s) do not divide the 4 data-parallel ranks; give the size");
  }
  TrainConfig plain = resolve(json::object(), 4);
  resolve_shard_group_per_node(plain, 2);  // no hybrid sharding: nothing to resolve
  EXPECT_EQ(plain.parallel.dp_shard, 4);
}

TEST(TrainConfig, FsdpShardingStrategiesAreZeroStages) {
  auto fsdp = [](json keys) { return json{{"parallel", {{"fsdp", keys}}}}; };
  EXPECT_EQ(resolve(fsdp({{"sharding_strategy", "full_shard"}})).zero_stage, 3);
  EXPECT_TRUE(resolve(fsdp({{"sharding_strategy", "full_shard"}})).reshard_after_forward);
  const auto grad_op = resolve(fsdp({{"sharding_strategy", "shard_grad_op"}}));
  EXPECT_EQ(grad_op.zero_stage, 3);
  EXPECT_FALSE(grad_op.reshard_after_forward);
  EXPECT_FALSE(resolve(fsdp({{"sharding_strategy", "full_shard"}, {"reshard_after_forward", false}})).reshard_after_forward);
  EXPECT_EQ(resolve(fsdp({{"sharding_strategy", "no_shard"}})).zero_stage, 0);
  EXPECT_EQ(resolve(fsdp({{"sharding_strategy", "full_shard"}}), 4).parallel.dp_shard, 4);
  const auto hybrid = resolve(fsdp({{"sharding_strategy", "hybrid_shard"}}));
  EXPECT_EQ(hybrid.zero_stage, 3);
  EXPECT_TRUE(hybrid.shard_groups_per_node);
  EXPECT_EQ(resolve(fsdp({{"sharding_strategy", "hybrid_shard"}, {"shard_group_size", 2}}), 4).parallel.dp_shard, 2);
  EXPECT_EQ(error_of(fsdp({{"sharding_strategy", "hybrid_shard"}, {"shard_group_size", 3}}), 4),
            "cfg.json: 'parallel.fsdp.shard_group_size' is 3, which does not divide the 4 data-parallel ranks");
  EXPECT_NE(error_of(fsdp({{"shard_group_size", 2}})).find("applies to parallel.fsdp.sharding_strategy hybrid_shard"), std::string::npos);
  auto both = fsdp({{"sharding_strategy", "full_shard"}});
  both["zero_optimization"] = {{"stage", 3}};
  EXPECT_EQ(resolve(both).zero_stage, 3);
  both["zero_optimization"] = {{"stage", 1}};
  EXPECT_EQ(error_of(both), "cfg.json: 'parallel.fsdp.sharding_strategy' full_shard shards as ZeRO stage 3 does, but "
                            "'zero_optimization.stage' is 1; set one of them");
  EXPECT_NE(error_of(fsdp({{"sharding_strategy", "everything"}})).find("must be \"full_shard\""), std::string::npos);
  EXPECT_NE(error_of(fsdp({{"reshard_after_forward", true}})).find("'parallel.fsdp.reshard_after_forward' applies to sharded parameters"),
            std::string::npos);
  auto bf16 = [](json keys) { return json{{"parallel", {{"fsdp", keys}}}, {"bf16", {{"enabled", true}}}}; };
  EXPECT_TRUE(resolve(bf16({{"sharding_strategy", "full_shard"}, {"param_dtype", "bf16"}})).gather_16bit);
  EXPECT_FALSE(resolve(bf16({{"sharding_strategy", "full_shard"}})).gather_16bit);
  EXPECT_EQ(error_of(fsdp({{"sharding_strategy", "full_shard"}, {"param_dtype", "bf16"}})),
            "cfg.json: 'parallel.fsdp.param_dtype' bf16 needs bf16.enabled: parameters are gathered in the type the run computes in, "
            "and this run computes in fp32");
  EXPECT_NE(error_of(bf16({{"param_dtype", "bf16"}})).find("applies to sharded parameters"), std::string::npos);
  EXPECT_NE(error_of(bf16({{"sharding_strategy", "full_shard"}, {"param_dtype", "int8"}})).find("must be \"fp32\", \"bf16\" or \"fp16\""),
            std::string::npos);
  EXPECT_NE(error_of(fsdp({{"sharding_strategy", "shard_grad_op"}, {"reshard_after_forward", true}})).find("contradicts"),
            std::string::npos);
}

TEST(TrainConfig, OffloadDevicesFollowDeepSpeedsRules) {
  auto with = [](int stage, const std::string& key, json section) {
    json z = {{"stage", stage}};
    z[key] = section;
    return json{{"zero_optimization", z}};
  };
  EXPECT_EQ(resolve(with(1, "offload_optimizer", {{"device", "cpu"}, {"pin_memory", true}})).offload_optimizer.device, "cpu");
  EXPECT_EQ(resolve(with(0, "offload_optimizer", {{"device", "none"}})).offload_optimizer.device, "none");
  EXPECT_EQ(resolve(with(3, "offload_param", {{"device", "cpu"}})).offload_param.device, "cpu");
  EXPECT_EQ(resolve(json::object()).offload_param.device, "none");
  const auto nvme = resolve(with(2, "offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/local_nvme"}})).offload_optimizer;
  EXPECT_EQ(nvme.device, "nvme");
  EXPECT_EQ(nvme.nvme_path, "/local_nvme");
  EXPECT_EQ(resolve(with(3, "offload_param", {{"device", "nvme"}, {"nvme_path", "/local_nvme"}})).offload_param.device, "nvme");
  EXPECT_EQ(error_of(with(2, "offload_param", {{"device", "nvme"}, {"nvme_path", "/local_nvme"}})),
            "cfg.json: 'zero_optimization.offload_param.device' nvme needs zero_optimization.stage 3, and this run has stage 2");
  EXPECT_EQ(error_of(with(2, "offload_optimizer", {{"device", "nvme"}})),
            "cfg.json: 'zero_optimization.offload_optimizer.device' nvme needs 'zero_optimization.offload_optimizer.nvme_path', a "
            "directory on the fast disk");
  EXPECT_EQ(error_of(with(0, "offload_optimizer", {{"device", "cpu"}})),
            "cfg.json: 'zero_optimization.offload_optimizer.device' cpu needs zero_optimization.stage 1 or above, and this run has stage 0");
  EXPECT_EQ(error_of(with(2, "offload_param", {{"device", "cpu"}})),
            "cfg.json: 'zero_optimization.offload_param.device' cpu needs zero_optimization.stage 3, and this run has stage 2");
  EXPECT_NE(error_of(with(1, "offload_optimizer", {{"device", "gpu"}})).find("must be \"none\", \"cpu\" or \"nvme\""), std::string::npos);
  EXPECT_NE(error_of(with(1, "offload_optimizer", {{"devcie", "cpu"}})).find("unknown key 'zero_optimization.offload_optimizer.devcie'"),
            std::string::npos);
}

TEST(TrainConfig, ModelPresetsAndOverridesResolve) {
  auto c = resolve({{"model", {{"preset", "tiny"}, {"arch", "llama"}, {"n_kv_head", 1}}}});
  EXPECT_EQ(c.model.arch, "llama");
  EXPECT_EQ(c.model.n_layer, 2);
  EXPECT_EQ(c.json["model"]["n_kv_head"], 1);
  EXPECT_NE(error_of({{"model", {{"preset", "huge"}}}}).find("model.preset"), std::string::npos);
  EXPECT_NE(error_of({{"model", {{"n_head", 5}}}}).find("model.d_model"), std::string::npos);
  EXPECT_NE(error_of({{"train", {{"steps", "many"}}}}).find("'train.steps' must be a whole number"), std::string::npos);
  EXPECT_NE(error_of({{"optimizer", {{"type", "AdamW"}, {"params", {{"lrr", 1}}}}}}).find("optimizer.params.lrr"), std::string::npos);
}

TEST(TrainConfig, SetOverridesParseJsonValuesAndBareStrings) {
  json user = json::object();
  apply_overrides(user, {"train.steps=7", "data.source=text:/tmp/x.txt", "train.freeze=[\"wte.*\"]", "gradient_clipping=0.5"});
  const auto c = resolve(user);
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.data_source, "text:/tmp/x.txt");
  EXPECT_EQ(c.freeze, std::vector<std::string>{"wte.*"});
  EXPECT_EQ(c.gradient_clipping, 0.5);
  EXPECT_THROW(apply_overrides(user, {"no_equals_sign"}), ConfigError);
}

TEST(TrainConfig, ANonJsonFileIsAnErrorNamingTheFile) {
  const std::string path = "/tmp/dtrain_test_bad_config_" + std::to_string(::getpid()) + ".json";
  { std::ofstream(path) << "{ \"train\": { steps: 3 } }"; }
  try {
    read_config_file(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos);
  }
  std::remove(path.c_str());
  EXPECT_THROW(read_config_file("/nonexistent/cfg.json"), ConfigError);
}

TEST(TrainConfig, TheDemoConfigResolvesOnTwoRanks) {
  const auto c = resolve_config(demo_config(), 2, "demo config");
  EXPECT_EQ(c.global_batch, 16);
  EXPECT_EQ(c.model.d_model, 192);
}

TEST(TrainConfig, EveryExampleConfigResolvesOnTwoRanks) {
  for (const char* name : {"gpt-small.json", "llama-tiny.json", "ds_config.json"}) {
    const std::string path = std::string(DTRAIN_SOURCE_DIR) + "/examples/" + name;
    EXPECT_NO_THROW(resolve_config(read_config_file(path), 2, path)) << path;
  }
}

namespace {

std::string read_error(const std::string& path) {
  try {
    read_config_file(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string set_error(const std::vector<std::string>& sets) {
  try {
    json user = json::object();
    apply_overrides(user, sets);
    resolve(user);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(TrainConfig, AConfigFileThatIsNoJsonObjectIsNamedWithWhatIsWrong) {
  const std::string dir = dtrain::test::scratch_dir("config_files");
  auto file = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  EXPECT_EQ(read_error(file("array.json", "[1, 2]")), "config file '" + dir + "/array.json' must hold a JSON object ({...}), got [1,2]");
  EXPECT_EQ(read_error(dir), "config file '" + dir + "' is a directory");
  EXPECT_EQ(read_error(file("empty.json", "")), "config file '" + dir + "/empty.json' is empty; a config is a JSON object, {} at the least");
  EXPECT_EQ(read_error(file("blank.json", " \n\t")), "config file '" + dir + "/blank.json' is empty; a config is a JSON object, {} at the least");
  EXPECT_EQ(read_error(file("elf.json", std::string("\x7f" "ELF\x02\x01\x01\0\0", 9))),
            "config file '" + dir + "/elf.json' is binary (it holds NUL bytes), not JSON text");
  EXPECT_EQ(read_error("/dev/zero"), "config file '/dev/zero' is a device, not a regular file");  // would never end
  EXPECT_EQ(read_error(dir + "/missing.json"), "config file '" + dir + "/missing.json' does not exist");
  // Not UTF-8: the parser's message quotes the bytes it read, escaped.
  const std::string latin1 = read_error(file("latin1.json", "{\"data\": {\"source\": \"text:caf\xe9.txt\"}}"));
  EXPECT_TRUE(dtrain::test::contains(latin1, "latin1.json' is not valid JSON: parse error at line 1, column 3")) << latin1;
  EXPECT_TRUE(dtrain::test::contains(latin1, "ill-formed UTF-8 byte; last read: '\"text:caf\\xe9")) << latin1;
  EXPECT_FALSE(dtrain::test::contains(latin1, "\xe9")) << "the raw byte reached the message";
  EXPECT_FALSE(dtrain::test::contains(latin1, "[json.exception")) << latin1;
}

// DeepSpeed users annotate their ds_config.json files; such a file used to be refused as invalid JSON.
TEST(TrainConfig, CommentsInAConfigFileAreSkipped) {
  const std::string dir = dtrain::test::scratch_dir("config_comments");
  std::ofstream(dir + "/commented.json") << "// the bench model\n{\n  \"train\": {\"steps\": 7}, /* short */\n"
                                            "  \"train_micro_batch_size_per_gpu\": 2  // per rank\n}\n";
  const TrainConfig c = load_train_config(dir + "/commented.json", {}, 1);
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.micro_batch, 2);
}

TEST(TrainConfig, ANumberTooLargeForADoubleIsNamedByItsKey) {
  const std::string dir = dtrain::test::scratch_dir("config_overflow");
  std::ofstream(dir + "/big.json") << R"({"train": {"steps": 3}, "optimizer": {"params": {"lr": 1e999}}})";
  EXPECT_EQ(read_error(dir + "/big.json"), "config file '" + dir +
                                               "/big.json': the number at 'optimizer.params.lr' is out of range for a double "
                                               "(whose magnitude ends near 1.8e308)");
  EXPECT_EQ(set_error({"optimizer.params.lr=1e999"}),
            "--set 'optimizer.params.lr=1e999': the number is out of range for a double (whose magnitude ends near 1.8e308)");
  EXPECT_EQ(set_error({"optimizer.params={\"lr\": -1e999}"}),
            "--set 'optimizer.params={\"lr\": -1e999}': the number at 'lr' is out of range for a double (whose magnitude ends near 1.8e308)");
}

TEST(TrainConfig, NestingDeeperThanAnyConfigIsRefusedBeforeItCanExhaustTheStack) {
  const std::string dir = dtrain::test::scratch_dir("config_deep");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');  // crashed with a segfault
  std::ofstream(dir + "/deep.json") << "{\"train\": {\"steps\": " << deep << "}}";
  EXPECT_EQ(read_error(dir + "/deep.json"),
            "config file '" + dir + "/deep.json': nests objects and lists deeper than 32 levels; a config needs a handful");
  const auto msg = set_error({"train.freeze=" + deep});
  EXPECT_TRUE(dtrain::test::contains(msg, "': nests objects and lists deeper than 32 levels")) << msg.substr(0, 300);
  const std::string fine = std::string(31, '[') + std::string(31, ']');
  EXPECT_EQ(set_error({"train.freeze=" + fine}), "cfg.json: 'train.freeze' entries must be strings, got " + fine.substr(1, 60));
}

TEST(TrainConfig, WholeNumbersOutsideTheirTypeOrRangeNameTheKeyAndTheRange) {
  const std::string int64_range = "must be at least 1 and fit a 64-bit integer (at most 9223372036854775807)";
  EXPECT_EQ(set_error({"train.steps=1e30"}), "cfg.json: 'train.steps' " + int64_range + ", got 1e+30");
  EXPECT_EQ(set_error({"train.steps=9223372036854775808"}), "cfg.json: 'train.steps' " + int64_range + ", got 9223372036854775808");
  EXPECT_EQ(set_error({"train.steps=18446744073709551616"}), "cfg.json: 'train.steps' " + int64_range + ", got 1.8446744073709552e+19");
  EXPECT_EQ(set_error({"train.steps=-9.3e18"}), "cfg.json: 'train.steps' " + int64_range + ", got -9.3e+18");
  EXPECT_EQ(set_error({"train.steps=2.5"}), "cfg.json: 'train.steps' must be a whole number, got 2.5");
  EXPECT_EQ(set_error({"train.steps=inf"}), "cfg.json: 'train.steps' must be a whole number, got \"inf\"");
  EXPECT_EQ(set_error({"train.steps=1e3"}), "(no error)");  // a whole number written as a double is fine
  // Fields stored in an int: 2^32 + 1 must not wrap to 1.
  EXPECT_EQ(set_error({"model.n_layer=4294967297"}), "cfg.json: 'model.n_layer' must be between 0 and 2147483647, got 4294967297");
  EXPECT_EQ(set_error({"checkpoint.keep=-1"}), "cfg.json: 'checkpoint.keep' must be between 0 and 2147483647, got -1");
  EXPECT_EQ(set_error({"train.threads=100000"}), "cfg.json: 'train.threads' must be between 0 and 4096, got 100000");
  EXPECT_EQ(set_error({"dist.timeout_s=1e300"}), "cfg.json: 'dist.timeout_s' must be between 1 and 31536000, got 1e+300");
  EXPECT_EQ(set_error({"data.val_fraction=-0.5"}), "cfg.json: 'data.val_fraction' must be at least 0, got -0.5");
}

TEST(TrainConfig, ValuesThatWouldOnlyFailLaterAreRefusedByName) {
  EXPECT_EQ(set_error({"train.steps=0"}), "cfg.json: 'train.steps' must be at least 1, got 0");
  EXPECT_EQ(set_error({"train.steps=5", "train.stop_at_step=6"}),
            "cfg.json: 'train.stop_at_step' (6) is past 'train.steps' (5), so the run would never stop there");
  EXPECT_EQ(set_error({"train.steps=5", "train.stop_at_step=5"}), "(no error)");
  EXPECT_EQ(set_error({"train.activation_checkpointing=every:0"}),
            "cfg.json: 'train.activation_checkpointing' must be \"none\", \"full\", \"selective\" or \"every:N\" (N >= 1), got "
            "\"every:0\"");
  EXPECT_EQ(set_error({"train.activation_checkpointing=every:3"}), "(no error)");
  const auto overflow = error_of({{"train_micro_batch_size_per_gpu", int64_t(1) << 62}, {"gradient_accumulation_steps", 4}});
  EXPECT_TRUE(dtrain::test::contains(overflow, "and that product overflows a 64-bit integer")) << overflow;
  EXPECT_EQ(set_error({"optimizer.type=5"}), "cfg.json: 'optimizer.type' must be a string, got 5");
  EXPECT_EQ(set_error({"scheduler={\"type\":\"wsd\",\"params\":{\"decay_fraction\":-2}}"}),
            "cfg.json: scheduler.params.decay_fraction must be between 0 and 1, got -2");
  EXPECT_EQ(set_error({"scheduler.params={\"warmup_steps\":1e30}"}),
            "cfg.json: scheduler.params.warmup_steps must be between 0 and 9007199254740992, got 1e+30");
}

TEST(TrainConfig, TextFromTheUserIsEchoedPrintable) {
  EXPECT_EQ(error_of({{"\x1b[2Jtrain", 1}}), "cfg.json: unknown key '\\x1b[2Jtrain'; docs/config.md lists every key");
  EXPECT_EQ(error_of({{"dist", {{"backend", "nc\ncl"}}}}),
            "cfg.json: 'dist.backend' must be \"auto\", \"shm\", \"gloo\" or \"nccl\", got \"nc\\ncl\"");
  EXPECT_EQ(error_of({{"model", {{"preset", "\x1b[31m"}}}}).substr(0, 44), "cfg.json: model.preset \"\\x1b[31m\" is unknown");
  EXPECT_EQ(set_error({"optimizer.params={\"\\r\": 1}"}), "cfg.json: optimizer.params.\\x0d is not a parameter of this optimizer");
  const std::string long_key(5000, 'k');
  EXPECT_LT(error_of({{long_key, 1}}).size(), 300u);
  // A --set that is not UTF-8 could never be written to config.json.
  EXPECT_EQ(set_error({"data.source=text:caf\xe9.txt"}), "--set 'data.source=text:caf\\xe9.txt' is not UTF-8 text, which a JSON config must be");
}

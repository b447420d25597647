// `dtrain estimate` as a user runs it: the JSON's totals add up from its terms, the per-node total
// and the verdict follow the flags, and bad input is refused with the flag or key named.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/process.h"

namespace dtrain::test {
namespace {

ProcessResult estimate(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {DTRAIN_BIN, "estimate"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, 60);
}

nlohmann::json estimate_json(const std::vector<std::string>& args) {
  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const ProcessResult r = estimate(with_json);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output.substr(r.output.find('{')));
}

TEST(EstimateCommand, JsonTotalsAreTheSumOfTheTerms) {
  const nlohmann::json j = estimate_json({"--set", "model.preset=tiny", "--set", "zero_optimization.stage=3", "--world-size", "2"});
  ASSERT_EQ(j["ranks"].size(), 1u);
  const auto& rank = j["ranks"][0];
  int64_t device = 0, tensors = 0;
  for (const auto& t : rank["terms"]) {
    ASSERT_TRUE(t.contains("bytes") && t.contains("formula") && t.contains("kind")) << t.dump();
    if (t["where"] == "device") device += t["bytes"].get<int64_t>();
    if (t["where"] == "device" && t["kind"] != "runtime") tensors += t["bytes"].get<int64_t>();
  }
  EXPECT_NEAR(double(device), double(rank["device_bytes"].get<int64_t>()), double(rank["terms"].size()));  // each term rounds once
  EXPECT_NEAR(double(tensors), double(rank["tensor_bytes"].get<int64_t>()), double(rank["terms"].size()));
  EXPECT_EQ(j["total_bytes"], rank["device_bytes"]);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_TRUE(j["fits"].get<bool>());  // a tiny model in 90% of any host's memory
}

TEST(EstimateCommand, GpusPerNodeAndTheVerdict) {
  const nlohmann::json fits = estimate_json({"--set", "model.preset=llama-1b", "--set", "bf16.enabled=true", "--set",
                                             "zero_optimization.stage=3", "--set", "train.activation_checkpointing=full", "--set",
                                             "train_micro_batch_size_per_gpu=1", "--gpus", "8", "--gpu-mem", "80GiB", "--nodes", "2"});
  EXPECT_EQ(fits["device"], "gpu");
  EXPECT_EQ(fits["ranks_per_node"], 4);
  EXPECT_EQ(fits["device_memory_bytes"].get<int64_t>(), int64_t(80) << 30);
  EXPECT_EQ(fits["node_bytes"].get<int64_t>(), 4 * fits["total_bytes"].get<int64_t>());
  EXPECT_TRUE(fits["fits"].get<bool>());
  EXPECT_EQ(fits["margin_bytes"].get<int64_t>(), (int64_t(80) << 30) - fits["total_bytes"].get<int64_t>());

  // GPT-2 124M with DDP's 16 bytes per parameter (2 GB) alone overflows 1 GB.
  const ProcessResult table = estimate({"--set", "model.preset=gpt2-124m", "--gpus", "1", "--gpu-mem", "1GB"});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("does not fit: "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("the biggest term is "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("optimizer states (AdamW)"), std::string::npos) << table.output;
}

// Offloaded states are counted where they go: on GPUs ZeRO-3 with both offloaded to NVMe keeps the
// streaming buffers and the gradient staging on the host and the state and shard in files, and the
// table gives both per rank and per node.
TEST(EstimateCommand, OffloadIsCountedOnTheHostAndOnNvme) {
  const std::vector<std::string> args = {"--set", "model.preset=gpt2-124m", "--set", "zero_optimization.stage=3", "--set",
                                         "zero_optimization.offload_optimizer={\"device\":\"nvme\",\"nvme_path\":\"/tmp\"}", "--set",
                                         "zero_optimization.offload_param={\"device\":\"nvme\",\"nvme_path\":\"/tmp\"}",
                                         "--gpus", "4", "--gpu-mem", "80GiB", "--nodes", "2"};
  const nlohmann::json j = estimate_json(args);
  const auto& rank = j["ranks"][0];
  const int64_t shard = 31109952;  // ceil(124,439,808 / 4)
  EXPECT_EQ(rank["nvme_bytes"].get<int64_t>(), 12 * shard);  // the fp32 shard and AdamW's two moments
  EXPECT_EQ(rank["host_bytes"].get<int64_t>(), 4 * 3 * 3 * (int64_t(1) << 20) + 4 * shard);  // 3 sets × 3 files of 2^20, the gradient staging
  EXPECT_EQ(j["node_nvme_bytes"].get<int64_t>(), 2 * rank["nvme_bytes"].get<int64_t>());
  EXPECT_EQ(j["node_host_bytes"].get<int64_t>(), 2 * rank["host_bytes"].get<int64_t>());
  const ProcessResult table = estimate(args);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  for (const std::string line : {"total per rank, host", "total per rank, nvme", "per node (2 ranks): "})
    EXPECT_NE(table.output.find(line), std::string::npos) << line << "\n" << table.output;
  EXPECT_NE(table.output.find(" host, "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find(" nvme\n"), std::string::npos) << table.output;
}

// A micro-batch left to memory is chosen for the memory estimated against, and estimated; with
// --gpu-mem too small for even 1, the estimate of 1 shows by how much.
TEST(EstimateCommand, ChoosesAnAutoMicroBatchForTheTargetsMemory) {
  const std::vector<std::string> trainer_style = {"--set", "model.preset=tiny", "--set", "gradient_accumulation_steps=2",
                                                  "--set", "train_micro_batch_size_per_gpu=auto", "--world-size", "1"};
  std::vector<std::string> roomy = trainer_style;
  roomy.insert(roomy.end(), {"--set", "train.memory_budget=200MiB"});
  const nlohmann::json j = estimate_json(roomy);
  const std::string line = j.value("micro_batch_choice", "");
  EXPECT_EQ(line.rfind("train_micro_batch_size_per_gpu auto: ", 0), 0u) << j.dump();
  EXPECT_NE(line.find("of the 200 MiB budget per rank (train.memory_budget)"), std::string::npos) << line;
  EXPECT_LE(j["total_bytes"].get<double>(), 200.0 * (1 << 20));
  std::vector<std::string> cramped = trainer_style;
  cramped.erase(cramped.end() - 2, cramped.end());
  cramped.insert(cramped.end(), {"--gpus", "1", "--gpu-mem", "100MiB"});
  const ProcessResult r = estimate(cramped);
  EXPECT_NE(r.output.find("train_micro_batch_size_per_gpu \"auto\": not even a micro-batch of 1 fits"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("micro-batch 1 x"), std::string::npos) << r.output;
}

TEST(EstimateCommand, RefusesBadInputNamingIt) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"--set", "model.bogus=1"}, 2, "unknown key 'model.bogus'"},
           {{"--gpus", "2", "--gpu-mem", "80XB"}, 1, "--gpu-mem: '80XB' is not a memory size"},
           {{"--world-size", "4", "--nodes", "3"}, 1, "--nodes 3 does not divide the 4 ranks evenly"},
           {{"--world-size", "2", "--gpus", "2"}, 2, "excludes"},
           {{"--gpus", "2"}, 1, "--gpu-mem: give each GPU's memory"},
           {{"--set", "parallel.pp=2", "--set", "parallel.cp=2", "--set", "parallel.pipeline.schedule=zero_bubble", "--gpus", "4",
             "--gpu-mem", "80GiB"},
            1,
            "no estimate for pp 2 with cp 2 under the zero_bubble schedule"},
           {{"--set", "train.freeze=[\"blocks.1.*\"]"}, 1, "no estimate for frozen blocks.1."}}) {
    const ProcessResult r = estimate(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << ::testing::PrintToString(c.args) << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << ::testing::PrintToString(c.args) << "\n" << r.output;
  }
}

TEST(EstimateCommand, PlanAccountsForEveryLayoutAndSaysHowToRunTheBest) {
  // A fixed peak: no probe, nothing timed.
  const nlohmann::json j = estimate_json({"--plan", "--world-size", "2", "--set", "model.preset=tiny", "--set", "train_batch_size=4",
                                          "--peak-gflops", "10", "--top", "3"});
  EXPECT_EQ(j["considered"].get<int>(), j["invalid"].get<int>() + j["not_covered"].get<int>() + j["not_fitting"].get<int>() +
                                            j["ranked"].get<int>());
  ASSERT_EQ(j["top"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["peak_flops"].get<double>(), 10e9);
  for (const auto& layout : j["top"]) {
    EXPECT_GT(layout["tokens_per_s"].get<double>(), 0) << layout.dump();
    EXPECT_GT(layout["memory_bytes"].get<int64_t>(), 0) << layout.dump();
  }
  EXPECT_LE(j["top"][0]["step_s"].get<double>(), j["top"][1]["step_s"].get<double>());
  const std::string run = j["run"];
  for (const auto& set : j["top"][0]["sets"]) EXPECT_NE(run.find("--set " + set.get<std::string>()), std::string::npos) << run;
  EXPECT_EQ(run.find("--set train_batch_size=4 --set parallel.dp"), std::string::npos) << "the user's own set of a planned key stays out: " << run;

  const ProcessResult table = estimate({"--plan", "--world-size", "2", "--set", "model.preset=tiny", "--peak-gflops", "10"});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("layouts considered: "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("to run it:\n  build/dtrain run --nproc-per-node 2"), std::string::npos) << table.output;

  // A vision-language model is built whole: planned here at the GEMM probe's peak, its parts not timed.
  const ProcessResult vlm = estimate({"--plan", "--world-size", "2", "--set", "model.preset=vlm-ocr", "--max-micro-batch", "1", "--top", "1"});
  ASSERT_EQ(vlm.exit_code, 0) << vlm.output;
  EXPECT_NE(vlm.output.find("compute: at 50% of the peak (a vision-language model's parts are not timed apart)"), std::string::npos)
      << vlm.output;

  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--plan"}, "--plan: give the ranks to plan for"},
           {{"--plan", "--gpus", "2", "--gpu-mem", "80GiB"}, "--gpu-type or --peak-gflops"},
           {{"--plan", "--gpus", "2", "--gpu-mem", "80GiB", "--gpu-type", "V100"}, "--gpu-type: 'V100' is not in the table"},
           {{"--plan", "--world-size", "2", "--efficiency", "0.8"}, "--efficiency: applies to a peak given by --peak-gflops or --gpu-type"}}) {
    const ProcessResult r = estimate(args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << ::testing::PrintToString(args) << "\n" << r.output;
  }
}

}  // namespace
}  // namespace dtrain::test

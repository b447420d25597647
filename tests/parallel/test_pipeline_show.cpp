// `dtrain pipeline show` as a user runs it: the printed bubble beside the closed form, the peak
// micro-batches per rank, costs from a trace, the pipeline and activation bytes a config gives,
// and errors that name the flag or the config key.
#include <gtest/gtest.h>

#include <fstream>

#include "support/process.h"
#include "support/scratch.h"

namespace dtrain {
namespace {

test::ProcessResult pipeline_show(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {DTRAIN_BIN, "pipeline", "show"};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_process(argv, 60);
}

TEST(PipelineShow, OneFOneBPrintsTheSimulatedBubbleBesideTheFormulaAndPpMinusRankInFlight) {
  const auto r = pipeline_show({"--pp", "4", "--micro-batches", "8", "--schedule", "1f1b"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // (p-1)/(m+p-1) = 3/11; the default costs F 1, B 2 make a step of 11 · 3 time units.
  EXPECT_TRUE(test::contains(r.output, "bubble 27.3% simulated, 27.3% by (p-1)/(m+p-1); step 33 time unit(s)")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "rank 3  ...0==1==2==3==4==5==6==7==......")) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(test::contains(r.output, "   " + std::to_string(rank) + std::string(29, ' ') + std::to_string(4 - rank) + "\n")) << r.output;
}

TEST(PipelineShow, ATracesMeanComputeSlicesBecomeTheCosts) {
  const std::string path = test::scratch_dir("pipeline_show_trace") + "/trace.json";
  std::ofstream(path) << R"({"traceEvents": [
    {"ph": "X", "cat": "compute", "name": "F", "dur": 900, "args": {"mb": 0, "chunk": 0}},
    {"ph": "X", "cat": "compute", "name": "F", "dur": 1100, "args": {"mb": 1, "chunk": 0}},
    {"ph": "X", "cat": "compute", "name": "B", "dur": 2000, "args": {"mb": 0, "chunk": 0}},
    {"ph": "X", "cat": "comm", "name": "send", "dur": 50000}]})";
  const auto r = pipeline_show({"--pp", "2", "--micro-batches", "2", "--trace", path});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::contains(r.output, "costs F 1000, B 2000, comm 0")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "bubble 33.3% simulated, 33.3% by (p-1)/(m+p-1); step 9000 us")) << r.output;
}

TEST(PipelineShow, ATraceWithEveryChunksSlicesIsSimulatedAtEachChunksOwnCosts) {
  const std::string path = test::scratch_dir("pipeline_show_chunk_trace") + "/trace.json";
  std::ofstream(path) << R"({"traceEvents": [
    {"ph": "X", "cat": "compute", "name": "F", "dur": 1000, "args": {"mb": 0, "chunk": 0}},
    {"ph": "X", "cat": "compute", "name": "B", "dur": 2000, "args": {"mb": 0, "chunk": 0}},
    {"ph": "X", "cat": "compute", "name": "F", "dur": 3000, "args": {"mb": 0, "chunk": 1}},
    {"ph": "X", "cat": "compute", "name": "B", "dur": 5000, "args": {"mb": 0, "chunk": 1}}]})";
  // 1F1B pp 2, m 4: rank 1 is the bottleneck, 4 · (3000 + 5000) after rank 0's first F and before
  // its last B: 35000, of which the ranks compute 12000 and 32000, so 26000 of 70000 idle (37.1%).
  // At the means (F 2000, B 3500) every rank would idle (p-1)/(m+p-1) = 20%, as the closed form says.
  const auto r = pipeline_show({"--pp", "2", "--micro-batches", "4", "--schedule", "1f1b", "--trace", path});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::contains(r.output, "simulated with each chunk's own costs: 0: F 1000, B 2000, comm 0; 1: F 3000, B 5000, comm 0")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "bubble 37.1% simulated, 20.0% by (p-1)/(m+p-1); step 35000 us")) << r.output;
  const auto other = pipeline_show({"--pp", "4", "--micro-batches", "4", "--trace", path});
  EXPECT_TRUE(test::contains(other.output, "every chunk at the means (the trace's slices give 2 chunk(s) their own, the schedule has 4)")) << other.output;
}

TEST(PipelineShow, BadInputIsRefusedNamingTheFlag) {
  EXPECT_TRUE(test::contains(pipeline_show({"--schedule", "2f2b"}).output, "--schedule '2f2b' is not one of gpipe, 1f1b, interleaved_1f1b, zero_bubble"));
  EXPECT_TRUE(test::contains(pipeline_show({"--costs", "F=1,X=2"}).output, "--costs: unknown action 'X'"));
  const auto interleaved = pipeline_show({"--schedule", "interleaved_1f1b", "--virtual-stages", "2", "--micro-batches", "6"});
  EXPECT_NE(interleaved.exit_code, 0);
  EXPECT_TRUE(test::contains(interleaved.output, "--pp 4 --virtual-stages 2 --micro-batches 6: interleaved_1f1b with 2 virtual stages needs "
                                           "micro-batches that are a multiple of pp (4), got 6"))
      << interleaved.output;
  EXPECT_TRUE(test::contains(pipeline_show({"--trace", "/nonexistent/trace.json"}).output, "--trace /nonexistent/trace.json: cannot be read"));
}

// A config file of the tiny model over 4 blocks, global batch 8 of micro-batches of 2, and `parallel`.
std::string tiny_config(const std::string& name, const std::string& parallel) {
  const std::string path = test::scratch_dir("pipeline_show_" + name) + "/config.json";
  std::ofstream(path) << R"({"model": {"preset": "tiny", "n_layer": 4}, "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "parallel": )"
                      << parallel << "}";
  return path;
}

// One tiny block (d 32, 2 heads, d_ff 128) keeps 2,072 bytes per token in fp32 (the memory
// estimate's count, tools/estimate/activation_memory.h): 66304 bytes for a micro-batch of 2 x 16 tokens.
constexpr int64_t kTinyBlockBytes = 2072 * 2 * 16;

TEST(PipelineShow, AConfigGivesThePipelineTheFlagsLeaveOutAndItsSplitTheBytes) {
  const std::string config = tiny_config("from_config", R"({"pp": 2, "pipeline": {"schedule": "gpipe", "split": [1, 3]}})");
  const auto r = pipeline_show({"--config", config});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 8 / (2 x dp 1) = 4 micro-batches (gradient_accumulation_steps "auto"); gpipe holds all 4.
  EXPECT_TRUE(test::contains(r.output, "gpipe: pp 2, 4 micro-batches, 1 chunk(s) per rank")) << r.output;
  EXPECT_TRUE(test::contains(r.output, config + ": pipeline split (parallel.pipeline.split): chunks of 1, 3 blocks")) << r.output;
  EXPECT_TRUE(test::contains(r.output, "bubble 20.0% simulated, 20.0% by (p-1)/(m+p-1)")) << r.output;
  static_assert(4 * kTinyBlockBytes == 259 * 1024, "rank 0's 4 micro-batches of one block");
  EXPECT_TRUE(test::contains(r.output, "   0                             4  259 KiB\n")) << r.output;
  EXPECT_FALSE(test::contains(r.output, "   1                             4  259 KiB\n")) << "rank 1's three blocks and head\n" << r.output;
}

TEST(PipelineShow, FlagsWinOverTheConfig) {
  const std::string config = tiny_config("flags_win", R"({"pp": 2, "pipeline": {"schedule": "gpipe", "split": [1, 3]}})");
  const auto r = pipeline_show({"--config", config, "--schedule", "1f1b", "--micro-batches", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::contains(r.output, "1f1b: pp 2, 2 micro-batches, 1 chunk(s) per rank")) << r.output;
  // 1F1B's rank 0 holds pp = 2 micro-batches of its one block: 132608 bytes.
  EXPECT_TRUE(test::contains(r.output, "   0                             2  130 KiB\n")) << r.output;
  // A pp from the flags that the config's explicit split does not fit is refused, as `dtrain run --set parallel.pp=4` is.
  const auto refused = pipeline_show({"--config", config, "--pp", "4"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(test::contains(refused.output, config + " with the pipeline flags: 'parallel.pipeline.split' [1, 3] gives 2 chunk(s), but "
                                                      "parallel.pp 4 x parallel.pipeline.virtual_stages 1 makes 4"))
      << refused.output;
}

TEST(PipelineShow, AConfigsVirtualStagesAndCostModelSplitAreShown) {
  const std::string config = tiny_config("interleaved", R"({"pp": 2, "pipeline": {"schedule": "interleaved_1f1b", "virtual_stages": 2}})");
  const auto r = pipeline_show({"--config", config});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::contains(r.output, "interleaved_1f1b: pp 2, 4 micro-batches, 2 chunk(s) per rank")) << r.output;
  EXPECT_TRUE(test::contains(r.output, config + ": pipeline split (cost model): chunks of 1, 1, 1, 1 blocks")) << r.output;
  // A split timed at start-up has no time here: the cost model's stands in, and says so.
  const auto timed = pipeline_show({"--config", tiny_config("auto_split", R"({"pp": 2, "pipeline": {"split": "auto"}})")});
  ASSERT_EQ(timed.exit_code, 0) << timed.output;
  EXPECT_TRUE(test::contains(timed.output, "pipeline split (cost model; \"auto\" times it when a run starts): chunks of")) << timed.output;
  // Bad config values are named by their key.
  const auto bad = pipeline_show({"--config", tiny_config("bad", R"({"pp": 2, "pipeline": {"schedule": "2f2b"}})")});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(test::contains(bad.output, "'parallel.pipeline.schedule' must be one of gpipe, 1f1b, interleaved_1f1b, zero_bubble")) << bad.output;
}

}  // namespace
}  // namespace dtrain

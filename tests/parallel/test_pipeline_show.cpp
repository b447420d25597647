// `dtrain pipeline show` as a user runs it: the printed bubble beside the closed form, the peak
// micro-batches per rank, costs from a trace, and errors that name the flag.
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

}  // namespace
}  // namespace dtrain

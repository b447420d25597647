// train.trace: a run's Chrome/Perfetto timeline (train/run_trace.h), read back from trace.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "support/scratch.h"
#include "train/run_trace.h"
#include "training_run.h"

using namespace dtrain;
using namespace dtrain::test;
using json = nlohmann::json;

namespace {

// Slices of one thread must nest or follow one another: Chrome's format draws nothing else right.
std::string first_overlap(std::vector<const json*> slices) {
  std::sort(slices.begin(), slices.end(), [](const json* a, const json* b) { return (*a)["ts"].get<double>() < (*b)["ts"].get<double>(); });
  std::vector<double> open_ends;  // ends of the slices enclosing the current one
  for (const json* s : slices) {
    const double begin = (*s)["ts"], end = begin + (*s)["dur"].get<double>();
    while (!open_ends.empty() && open_ends.back() <= begin) open_ends.pop_back();
    if (!open_ends.empty() && end > open_ends.back()) return (*s)["name"].get<std::string>() + " overlaps the slice it starts in";
    open_ends.push_back(end);
  }
  return "";
}

}  // namespace

TEST(Trace, PartsMergeOnOneClockPerHostWithOverlappingCollectivesOnLanesOfTheirOwn) {
  auto event = [](const char* name, const char* cat, double ts, double dur) {
    return json{{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", ts}, {"dur", dur}};
  };
  // Ranks 0 and 1 share a host, rank 1 left the barrier first; rank 2's clock is another host's.
  const std::vector<json> parts = {
      {{"rank", 0}, {"host", "a"}, {"origin_us", 1000.0}, {"dropped", 0},
       {"events", {event("F", "compute", 1010, 5), event("all_reduce x", "comm", 1012, 10), event("all_reduce y", "comm", 1014, 10),
                   event("all_reduce z", "comm", 1022, 1)}}},
      {{"rank", 1}, {"host", "a"}, {"origin_us", 990.0}, {"dropped", 3}, {"events", {event("F", "compute", 995, 5)}}},
      {{"rank", 2}, {"host", "b"}, {"origin_us", 50.0}, {"dropped", 0}, {"events", {event("F", "compute", 60, 5)}}}};
  const json merged = merge_trace_parts(parts);
  std::map<std::pair<int, std::string>, json> slices;
  std::set<std::tuple<int, int, std::string>> thread_names;
  std::set<int> labelled;
  auto slice = [&](int pid, const std::string& name) { return slices[{pid, name}]; };
  for (const json& e : merged.at("traceEvents")) {
    if (e["ph"] == "X") slices[{e["pid"].get<int>(), e["name"].get<std::string>()}] = e;
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert({e["pid"].get<int>(), e["tid"].get<int>(), e["args"]["name"].get<std::string>()});
    if (e["ph"] == "M" && e["name"] == "process_labels") labelled.insert(e["pid"].get<int>());
  }
  EXPECT_EQ(slice(0, "F")["ts"], 20.0);
  EXPECT_EQ(slice(1, "F")["ts"], 5.0);
  EXPECT_EQ(slice(2, "F")["ts"], 10.0);
  EXPECT_EQ(slice(0, "F")["tid"], 0);
  EXPECT_EQ(slice(0, "all_reduce x")["tid"], 1);
  EXPECT_EQ(slice(0, "all_reduce y")["tid"], 2);  // starts while x is in flight
  EXPECT_EQ(slice(0, "all_reduce z")["tid"], 1);  // starts after x ended
  EXPECT_EQ(thread_names, (std::set<std::tuple<int, int, std::string>>{
                              {0, 0, "compute"}, {0, 1, "comm 1"}, {0, 2, "comm 2"}, {1, 0, "compute"}, {2, 0, "compute"}}));
  EXPECT_EQ(labelled, std::set<int>{1});
}

TEST(Trace, TwoRanksWriteOneTimelineOfTheirMicroBatchesAndCollectives) {
  constexpr int kSteps = 3, kMicroBatches = 2;
  const TrainingRun run = train(scratch_dir("trace"), 2,
                                {"train.trace=true", "train.steps=" + std::to_string(kSteps),
                                 "gradient_accumulation_steps=" + std::to_string(kMicroBatches)});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const json trace = json::parse(read_text_file(run.dir + "/trace.json"));
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  std::map<int, std::string> process_names;
  std::map<int, std::map<std::string, std::vector<const json*>>> by_rank_and_name;  // complete events
  std::map<std::pair<int, int>, std::vector<const json*>> by_thread;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") process_names[e.at("pid").get<int>()] = e.at("args").at("name").get<std::string>();
    if (e.at("ph") != "X") continue;
    EXPECT_GE(e.at("ts").get<double>(), 0.0) << e.dump();
    EXPECT_GE(e.at("dur").get<double>(), 0.0) << e.dump();
    const std::string name = e.at("name");
    by_rank_and_name[e.at("pid").get<int>()][name.substr(0, name.find(' '))].push_back(&e);
    by_thread[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(&e);
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  ASSERT_EQ(by_rank_and_name.size(), 2u);
  for (auto& [rank, by_name] : by_rank_and_name) {
    for (const std::string kind : {"F", "B"}) {
      const auto& slices = by_name[kind];
      ASSERT_EQ(slices.size(), size_t(kSteps * kMicroBatches)) << "rank " << rank << " " << kind;
      for (size_t i = 0; i < slices.size(); ++i) {
        EXPECT_EQ(slices[i]->at("cat"), "compute");
        EXPECT_EQ(slices[i]->at("args"), (json{{"mb", int(i % kMicroBatches)}, {"chunk", 0}})) << "rank " << rank << " " << kind << " " << i;
      }
    }
    for (size_t i = 0; i < by_name["F"].size(); ++i) {  // each micro-batch's forward ends before its backward starts
      const json &f = *by_name["F"][i], &b = *by_name["B"][i];
      EXPECT_LE(f["ts"].get<double>() + f["dur"].get<double>(), b["ts"].get<double>()) << "rank " << rank << " micro-batch " << i;
    }
    // The gradient buckets once per step and the loss's average at least.
    ASSERT_GE(by_name["all_reduce"].size(), size_t(2 * kSteps)) << "rank " << rank;
    for (const json* e : by_name["all_reduce"]) {
      EXPECT_EQ(e->at("cat"), "comm");
      EXPECT_TRUE(e->at("args").contains("group"));
    }
  }
  for (const auto& [thread, slices] : by_thread) EXPECT_EQ(first_overlap(slices), "") << "pid " << thread.first << " tid " << thread.second;
}

TEST(Trace, ARunWithoutTheKeyWritesNoTrace) {
  const TrainingRun run = train(scratch_dir("no_trace"), 2, {"train.steps=1"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_TRUE(std::filesystem::exists(run.dir + "/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(run.dir + "/trace.json"));
}

// train.profile_steps: LibTorch's profiler over the chosen steps (train/operator_profile.h), one
// trace per rank, holding the operators the steps ran: the model's matrix products among them.
TEST(OperatorProfile, TheChosenStepsOfEachRankAreWrittenAsLibTorchsTrace) {
  const TrainingRun run = train(scratch_dir("operator_profile"), 2, {"train.steps=3", "train.profile_steps=[2, 3]"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_NE(run.result.output.find("profile: steps 2..3"), std::string::npos) << run.result.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = run.dir + "/profile-rank-" + std::to_string(rank) + ".json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
    std::set<std::string> operators;
    const json profile = json::parse(read_text_file(path));
    for (const json& e : profile.at("traceEvents"))
      if (e.value("cat", "") == "cpu_op") operators.insert(e["name"].get<std::string>());
    EXPECT_TRUE(operators.count("aten::mm") || operators.count("aten::addmm") || operators.count("aten::matmul")) << path;
  }
}

TEST(OperatorProfile, StepsOutsideTheRunAreRefusedByName) {
  for (const std::string& steps : {"[3, 2]", "[0, 1]", "[2, 9]", "[2]"}) {
    const TrainingRun run = train(scratch_dir("operator_profile_refused"), 1, {"train.steps=3", "train.profile_steps=" + steps});
    EXPECT_NE(run.result.exit_code, 0) << steps;
    EXPECT_NE(run.result.output.find("'train.profile_steps' must be [] or [first, last]"), std::string::npos) << run.result.output;
  }
}

TEST(OperatorProfile, AStartPastTheChosenStepsSaysNothingIsProfiled) {
  const std::string dir = scratch_dir("operator_profile_resumed");
  const TrainingRun first = train(dir, 1, {"train.steps=3"});
  ASSERT_EQ(first.result.exit_code, 0) << first.result.output;
  const TrainingRun resumed = train(dir, 1, {"train.steps=5", "train.profile_steps=[2, 3]"});
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_NE(resumed.result.output.find("this start begins after step 3, so nothing is profiled"), std::string::npos) << resumed.result.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/profile-rank-0.json"));
}

// Elastic membership (--nnodes MIN:MAX) with real training: two agents of two ranks each on loopback
// train the tiny model; one is SIGKILLed mid-run and the other goes on alone at world 2 from the last
// checkpoint; an agent started again makes the next round 4 ranks again; the agent hosting the store
// can be the one lost.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>

#include "launch/launch_test_cli.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// The tiny model with everything fixed (as tests/train/training_run.h), a checkpoint every two steps,
// all of them kept, and a global batch of 8 that 4 ranks (micro-batch 2) and 2 (accumulation 2) both make.
std::vector<std::string> job_sets(const std::string& dir, int steps) {
  return {"train.run_dir=" + dir, "model.preset=tiny", "train.steps=" + std::to_string(steps), "train.seed=7", "train.eval_every=0",
          "train.peak_flops=1e9", "gradient_clipping=1.0", "optimizer.params={\"lr\":0.002,\"weight_decay\":0.1,\"eps\":1e-6}",
          "scheduler={\"type\":\"cosine\",\"params\":{\"warmup_steps\":1}}", "steps_per_print=1", "train_micro_batch_size_per_gpu=2",
          "checkpoint.every_steps=2", "checkpoint.keep=1000"};
}

std::vector<std::string> run_argv(const std::vector<std::string>& flags, const std::vector<std::string>& sets, int nproc = 2) {
  std::vector<std::string> argv{kBin, "run", "--nproc-per-node", std::to_string(nproc), "--no-sample"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
  return argv;
}

// One elastic agent of the job, as `dtrain run --nnodes 1:2`.
std::future<ProcessResult> start_agent(int port, const std::vector<std::string>& sets) {
  const auto argv = run_argv({"--nnodes", "1:2", "--master-port", std::to_string(port), "--heartbeat-timeout", "5",
                              "--grace-period", "2", "--rdzv-timeout", "120"},
                             sets);
  return std::async(std::launch::async, [argv] { return run_process(argv, 300, {"OMP_NUM_THREADS=1"}); });
}

// What an elastic agent's launch report (launch-agent-<host>-<pid>.log) says of it.
struct AgentLog {
  int pid = 0;
  bool hosts_store = false;
  std::string text;
  std::string verdict_path;
};

// Every elastic agent's report in the run directory, in no particular order.
std::vector<AgentLog> agent_logs(const std::string& dir) {
  std::vector<AgentLog> logs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("launch-agent-", 0) != 0 || e.path().extension() != ".log") continue;
    AgentLog log;
    log.text = read_text(e.path().string());
    log.verdict_path = (e.path().parent_path() / e.path().stem()).string() + ".json";
    std::smatch m;
    if (std::regex_search(log.text, m, std::regex(R"(elastic agent \(pid (\d+)\)[^\n]*)"))) {
      log.pid = std::stoi(m[1].str());
      log.hosts_store = contains(m[0].str(), "hosted by this agent");
    }
    logs.push_back(log);
  }
  return logs;
}

// How many agents' reports hold `text`.
int agents_saying(const std::string& dir, const std::string& text) {
  int n = 0;
  for (const auto& log : agent_logs(dir)) n += contains(log.text, text);
  return n;
}

std::string all_logs(const std::string& dir) {
  std::string out;
  for (const auto& log : agent_logs(dir)) out += log.text + "----\n";
  return out;
}

int checkpoints(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/ckpt", ec))
    if (e.path().filename().string().rfind("step-", 0) == 0 && e.path().extension() != ".tmp") ++n;
  return n;
}

// Two elastic agents of one job (`dtrain run --nnodes 1:2`, 2 ranks each) and, once they train at
// world 4, their reports: the agent that hosts the rendezvous store and the other.
struct TwoAgents {
  std::future<ProcessResult> first, second;
  AgentLog store_host, other;

  // Both results once each has ended: the survivor's, when the other was ended by SIGKILL.
  ProcessResult survivor() {
    ProcessResult a = first.get(), b = second.get();
    return a.signal == SIGKILL ? b : a;
  }
};

// Starts both on `port` for `steps` steps in `dir` and waits until they run a world of 4 that has
// committed a checkpoint of its own; returns why not, empty once they do.
std::string start_two_agents(TwoAgents& job, const std::string& dir, int port, int steps) {
  job.first = start_agent(port, job_sets(dir, steps));
  job.second = start_agent(port, job_sets(dir, steps));
  if (!wait_for([&] { return agents_saying(dir, "world 4") == 2; }, 180)) return "no world 4:\n" + all_logs(dir);
  const int before = checkpoints(dir);
  if (!wait_for([&] { return checkpoints(dir) > before; }, 120)) return "no checkpoint at world 4:\n" + all_logs(dir);
  const auto logs = agent_logs(dir);
  if (logs.size() != 2 || logs[0].hosts_store == logs[1].hosts_store || logs[0].pid <= 0 || logs[1].pid <= 0)
    return "not two agents, one hosting the store:\n" + all_logs(dir);
  job.store_host = logs[0].hosts_store ? logs[0] : logs[1];
  job.other = logs[0].hosts_store ? logs[1] : logs[0];
  return "";
}

std::map<int, double> losses(const std::string& dir) {
  std::map<int, double> out;
  std::ifstream metrics(dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("loss")) out[j["step"].get<int>()] = j["loss"].get<double>();
  }
  return out;
}

// The step the last restart resumed from, as rank 0 said; -1 when none did.
int resumed_step(const std::string& output) {
  int step = -1;
  const std::regex re(R"(resumed from \S+ at step (\d+))");
  for (std::sregex_iterator it(output.begin(), output.end(), re), end; it != end; ++it) step = std::stoi((*it)[1].str());
  return step;
}

constexpr int kSteps = 120;

// SIGKILL to the agent that does not host the store: its workers die with it, the survivor's round
// ends, and the next one, of the survivor alone, resumes the last checkpoint at world 2 with the
// global batch kept. Its losses are those of a run resumed at world 2 from that checkpoint: the same
// operations in the same order, within the fp32 tolerance of the resume tests (rtol 1e-5).
TEST(ElasticMembership, ASurvivorContinuesAloneFromTheLastCheckpoint) {
  const std::string dir = scratch_dir("elastic_survivor");
  TwoAgents job;
  ASSERT_EQ(start_two_agents(job, dir, free_port(), kSteps), "");
  const int seen_checkpoints = checkpoints(dir);
  ::kill(job.other.pid, SIGKILL);
  const ProcessResult survivor = job.survivor();
  ASSERT_EQ(survivor.exit_code, 0) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "membership changed: 2 nodes -> 1 node (world 4 -> 2); not counted against --max-restarts"))
      << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "kept on 2 data-parallel rank(s) as micro-batch 2 x accumulation 2")) << survivor.output;
  const int from = resumed_step(survivor.output);
  ASSERT_GE(from, 2 * seen_checkpoints) << "the survivor did not resume the newest checkpoint before the kill\n" << survivor.output;

  // The same checkpoint resumed at world 2 by a plain run.
  const std::string ref = scratch_dir("elastic_survivor_reference");
  auto ref_sets = job_sets(ref, kSteps);
  ref_sets.push_back("train.resume=" + dir + "/ckpt/step-" + std::string(8 - std::to_string(from).size(), '0') + std::to_string(from));
  const ProcessResult reference = run_process(run_argv({}, ref_sets), 300, {"OMP_NUM_THREADS=1"});
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const auto got = losses(dir), expected = losses(ref);
  ASSERT_EQ(got.size(), size_t(kSteps));
  for (int step = from + 1; step <= kSteps; ++step) {
    ASSERT_TRUE(expected.count(step)) << "the reference has no step " << step;
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * std::abs(expected.at(step))) << "step " << step;
  }
}

// The agent hosting the store is lost: the survivor takes the store over and goes on alone; an agent
// started again with the same endpoint is noticed as waiting, ends that round, and the next one runs
// 4 ranks again to the end.
TEST(ElasticMembership, TheStoreHostIsReplacedAndARejoiningNodeMakesTheWorld4Again) {
  const std::string dir = scratch_dir("elastic_rejoin");
  const int port = free_port();
  // Long enough that the survivor is still training when the third agent, which takes seconds to start, joins.
  constexpr int kLonger = 400;
  TwoAgents job;
  ASSERT_EQ(start_two_agents(job, dir, port, kLonger), "");
  ::kill(job.store_host.pid, SIGKILL);
  // The survivor, now node 0 of 1, trains at world 2 before the agent comes back.
  ASSERT_TRUE(wait_for([&] { return agents_saying(dir, "node 0 of 1 node, world 2") == 1; }, 120)) << all_logs(dir);
  const int before = checkpoints(dir);
  ASSERT_TRUE(wait_for([&] { return checkpoints(dir) > before; }, 120));
  auto third = start_agent(port, job_sets(dir, kLonger));
  const ProcessResult survivor = job.survivor(), r2 = third.get();
  ASSERT_EQ(survivor.exit_code, 0) << survivor.output;
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_TRUE(contains(survivor.output, "this agent now hosts the rendezvous store")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "membership changed: 2 nodes -> 1 node (world 4 -> 2)")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "a node is waiting to join")) << survivor.output;
  EXPECT_TRUE(contains(survivor.output, "membership changed: 1 node -> 2 nodes (world 2 -> 4)")) << survivor.output;
  EXPECT_TRUE(contains(r2.output, "node 1 of 2 nodes, world 4")) << r2.output;
  EXPECT_EQ(losses(dir).size(), size_t(kLonger));
  const auto verdict = read_json(job.other.verdict_path);
  EXPECT_EQ(verdict.value("outcome", ""), "succeeded") << verdict.dump();
  ASSERT_EQ(verdict["membership"].size(), 2u) << verdict.dump();
  EXPECT_EQ(verdict["membership"][0]["new_nodes"], 1);
  EXPECT_EQ(verdict["membership"][1]["new_nodes"], 2);
}

// A worker failure after which the same nodes meet again is a restart, counted against --max-restarts;
// the workers of the next round learn the world before and when its end was seen. Rank 1 fails only
// once rank 0 has printed (a file in `dir` says so): the failure stops rank 0, whose line the test reads.
std::vector<std::string> failing_once_in(const std::string& dir) {
  return {"sh", "-c",
          "echo ENV $DTRAIN_RESTART_COUNT ${DTRAIN_PREVIOUS_WORLD_SIZE:-none} ${DTRAIN_FAILURE_TIME:-none}; "
          "if [ $RANK = 0 ]; then touch " + dir + "/printed.$DTRAIN_RESTART_COUNT; fi; "
          "if [ $RANK = 1 ] && [ $DTRAIN_RESTART_COUNT = 0 ]; then "
          "while [ ! -e " + dir + "/printed.0 ]; do sleep 0.05; done; exit 3; fi"};
}

TEST(ElasticMembership, AWorkerFailureIsCountedAndTheNextRoundIsToldTheWorldBefore) {
  const std::vector<std::string> program = failing_once_in(scratch_dir("elastic_worker_failure"));
  const std::vector<std::string> flags{"--nnodes", "1:2", "--nproc-per-node", "2", "--master-port", std::to_string(free_port()),
                                       "--rdzv-last-call", "0.2"};
  const double before = double(std::time(nullptr));
  auto once = flags;
  once.insert(once.end(), {"--max-restarts", "1"});
  auto r = run_process(launch(once, program), 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 0] ENV 0 none none")) << r.output;
  EXPECT_TRUE(contains(r.output, "restarting the job (restart 1 of 1)")) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(\[rank 0\] ENV 1 2 (\d+\.\d{3}))"))) << r.output;
  EXPECT_GE(std::stod(m[1].str()), before);
  EXPECT_LE(std::stod(m[1].str()), double(std::time(nullptr)) + 1);

  auto spent = run_process(launch(flags, failing_once_in(scratch_dir("elastic_worker_failure_spent"))), 60);
  EXPECT_EQ(spent.exit_code, 1) << spent.output;
  EXPECT_TRUE(contains(spent.output, "giving up after 0 restarts (--max-restarts 0): rank 1 failed: exit code 3")) << spent.output;
}

// An agent that stops answering (SIGSTOP: its workers run on, its heartbeat does not) is lost after
// --heartbeat-timeout: the other ends the round and goes on alone. (A long last call, so that the
// first round waits for the second agent however slowly it starts.)
TEST(ElasticMembership, AnAgentThatStopsAnsweringIsLostAfterTheHeartbeatTimeout) {
  const std::string dir = scratch_dir("elastic_silent");
  const std::string port = std::to_string(free_port());
  auto start = [&](const std::string& marker) {
    const auto argv = launch({"--nnodes", "1:2", "--nproc-per-node", "1", "--master-port", port, "--heartbeat-timeout", "2",
                              "--grace-period", "1", "--rdzv-last-call", "10", "--run-dir", dir},
                             {"sh", "-c", "if [ $WORLD_SIZE = 1 ]; then echo alone; exit 0; fi; exec " + kSleeper + " 60 " + marker});
    return std::async(std::launch::async, [argv] { return run_process(argv, 90); });
  };
  const std::string a_marker = unique_marker("silent_a"), b_marker = unique_marker("silent_b");
  auto a = start(a_marker);
  auto b = start(b_marker);
  ASSERT_TRUE(wait_for([&] { return agents_saying(dir, "world 2") == 2; }, 60)) << all_logs(dir);
  const auto logs = agent_logs(dir);
  const AgentLog& silent = logs[0].hosts_store ? logs[1] : logs[0];
  ASSERT_GT(silent.pid, 0) << all_logs(dir);
  ::kill(silent.pid, SIGSTOP);
  const bool a_is_silent = launcher_pid(a_marker) == silent.pid;
  ASSERT_TRUE(a_is_silent || launcher_pid(b_marker) == silent.pid);
  auto survivor = a_is_silent ? std::move(b) : std::move(a);
  auto stopped = a_is_silent ? std::move(a) : std::move(b);
  const ProcessResult r = survivor.get();
  ::kill(silent.pid, SIGKILL);
  stopped.get();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "agent stopped beating for 2s (agent dead or host down)")) << r.output;
  EXPECT_TRUE(contains(r.output, "membership changed: 2 nodes -> 1 node (world 2 -> 1)")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 0] alone")) << r.output;
  EXPECT_TRUE(wait_for([&] { return !process_with_marker_alive(a_marker) && !process_with_marker_alive(b_marker); }, 10));
}

// dtrain run sets --world-multiple from the config's mesh: a lone node of one rank cannot hold tp 2,
// so it waits for a second one and fails naming why when none comes.
TEST(ElasticMembership, ANodeCountThatCannotFormTheMeshWaitsAndFailsSayingSo) {
  const std::string dir = scratch_dir("elastic_mesh");
  auto sets = job_sets(dir, 4);
  sets.push_back("parallel.tp=2");
  const ProcessResult r = run_process(run_argv({"--nnodes", "1:2", "--master-port", std::to_string(free_port()), "--rdzv-timeout", "3"}, sets, 1), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "in round 0: the new membership cannot form the mesh: no count of 1 node(s) or fewer, at least 1, makes a "
                                 "world of 1 rank(s) per node that is a multiple of 2 (--world-multiple; under dtrain run, the config's "
                                 "parallel.tp x pp x cp)")) << r.output;
}

TEST(ElasticMembership, ANodeRankIsRefusedWithARange) {
  auto r = run_process(launch({"--nnodes", "1:2", "--node-rank", "0"}, {"true"}), 30);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--node-rank is assigned by the rendezvous with --nnodes MIN:MAX; leave it out")) << r.output;
  auto bad = run_process(launch({"--nnodes", "3:2"}, {"true"}), 30);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "MIN is larger than MAX")) << bad.output;
  auto mesh = run_process(launch({"--nnodes", "1:3", "--nproc-per-node", "1", "--world-multiple", "4"}, {"true"}), 30);
  EXPECT_EQ(mesh.exit_code, 2) << mesh.output;
  EXPECT_TRUE(contains(mesh.output, "never makes a world that is a multiple of 4 (--world-multiple)")) << mesh.output;
}

// `dtrain run` samples from the final checkpoint on the node that is node 0 of the job's last round,
// elastic or not: here one agent of 1:2, alone once the last call has passed.
TEST(ElasticMembership, AnElasticRunPrintsItsSample) {
  const std::string dir = scratch_dir("elastic_sample");
  std::vector<std::string> argv{kBin, "run", "--nproc-per-node", "2", "--nnodes", "1:2", "--master-port", std::to_string(free_port()),
                                "--prompt", "The "};
  for (const auto& s : job_sets(dir, 4)) argv.insert(argv.end(), {"--set", s});
  const auto r = run_process(argv, 120, {"OMP_NUM_THREADS=1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "sample from " + dir + "/ckpt/step-00000004:\nThe ")) << r.output;
}

}  // namespace
}  // namespace dtrain::test

// Host lists and the agents they turn into, without starting anything: DeepSpeed's hostfile format,
// every bad line named by file and line, the flags users bring from torchrun, DeepSpeed and accelerate,
// and the command line each host runs.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <map>

#include "launch/host_launch_options.h"
#include "launch/hostfile.h"
#include "launch/remote_command.h"
#include "support/error_of.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain {
namespace {

using test::contains;

std::string hostfile_error(const std::string& text) {
  return test::error_of([&] { parse_hostfile(text, "hosts.txt"); });
}

TEST(Hostfile, ReadsHostsAndSlotsSkippingCommentsAndBlankLines) {
  const auto hosts = parse_hostfile("# the job's nodes\n\nworker-1 slots=4\n  10.0.0.2\tslots=4   # the second\nme@n3 slots=4\n",
                                    "hosts.txt");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "worker-1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[0].where, "hosts.txt:3");
  EXPECT_EQ(hosts[1].name, "10.0.0.2");
  EXPECT_EQ(hosts[1].where, "hosts.txt:4");
  EXPECT_EQ(hosts[2].name, "me@n3");
  EXPECT_EQ(host_address(hosts[2].name), "n3");
  EXPECT_EQ(host_address(hosts[0].name), "worker-1");
}

TEST(Hostfile, ABadLineIsNamedByFileAndLine) {
  EXPECT_EQ(hostfile_error("n1 slots=2\nn2\n"), "hosts.txt:2: expected 'HOST slots=N', got 'n2'");
  EXPECT_EQ(hostfile_error("n1 slots=2 gpus=8\n"), "hosts.txt:1: expected 'HOST slots=N', got 'n1 slots=2 gpus=8'");
  EXPECT_EQ(hostfile_error("n1 slot=2\n"), "hosts.txt:1: expected 'HOST slots=N', got 'n1 slot=2'");
  EXPECT_EQ(hostfile_error("\nn1 slots=two\n"), "hosts.txt:2: slots must be a whole number from 1 to 999999, got 'slots=two'");
  EXPECT_EQ(hostfile_error("n1 slots=-1\n"), "hosts.txt:1: slots must be a whole number from 1 to 999999, got 'slots=-1'");
  EXPECT_EQ(hostfile_error("-oProxyCommand=x slots=1\n"),
            "hosts.txt:1: '-oProxyCommand=x' is not a host name (it starts with '-')");
  EXPECT_EQ(hostfile_error("n1;reboot slots=1\n"),
            "hosts.txt:1: 'n1;reboot' is not a host name (letters, digits and . _ - @ : only)");
}

TEST(Hostfile, SlotsZeroIsRefused) {
  EXPECT_EQ(hostfile_error("n1 slots=0\n"), "hosts.txt:1: slots must be a whole number from 1 to 999999, got 'slots=0'");
}

TEST(Hostfile, AHostListedTwiceIsRefusedNamingBothLines) {
  EXPECT_EQ(hostfile_error("n1 slots=2\nn2 slots=2\n# again\nn1 slots=2\n"),
            "hosts.txt:4: host n1 is listed twice (first at hosts.txt:1)");
}

TEST(Hostfile, EveryHostMustRunAsManyRanks) {
  EXPECT_EQ(hostfile_error("n1 slots=8\nn2 slots=4\n"),
            "hosts.txt:2: n2 has slots=4 but n1 (hosts.txt:1) has slots=8: every node runs the same number of ranks");
}

TEST(Hostfile, AFileWithoutHostsIsRefused) {
  EXPECT_EQ(hostfile_error("# nothing yet\n\n"), "hosts.txt: no hosts in it (one 'HOST slots=N' per line)");
  EXPECT_TRUE(contains(test::error_of([] { read_hostfile("/nonexistent/hosts"); }),
                       "cannot read the hostfile /nonexistent/hosts (--hostfile)"));
}

TEST(HostList, TakesItsSlotsFromTheFlagAndRefusesDuplicates) {
  const auto hosts = parse_host_list("a,b", 3);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[1].name, "b");
  EXPECT_EQ(hosts[1].slots, 3);
  EXPECT_EQ(test::error_of([] { parse_host_list("a,b,a", 1); }), "--hosts: host a is listed twice (first at --hosts)");
  EXPECT_EQ(test::error_of([] { parse_host_list("a,,b", 1); }), "--hosts: an empty host name");
}

struct Parsed {
  LaunchOptions launch;
  HostPlan plan;
  std::string error;
};

// `args` parsed as `dtrain launch` parses its flags, then planned on the hosts they name.
Parsed parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app;
  add_launch_flags(app, p.launch);
  add_host_launch_flags(app, p.plan.how);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
    if (p.plan.how.starts_hosts()) p.plan.hosts = plan_hosts(p.plan.how, app, p.launch);
  } catch (const std::exception& e) {
    p.error = e.what();
  }
  return p;
}

TEST(HostPlan, NodesComeFromTheHostsInTheirOrderAndNode0IsTheMaster) {
  const auto p = parse({"--hosts", "me@n1,n2,n3", "--nproc-per-node", "4"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.launch.nnodes, 3);
  EXPECT_EQ(p.launch.nproc_per_node, 4);
  EXPECT_EQ(p.launch.master_addr, "n1");
  EXPECT_EQ(p.plan.hosts[2].name, "n3");
  const auto flags = node_agent_flags(p.launch, 2);
  const std::vector<std::string> head{"--nproc-per-node", "4", "--nnodes", "3", "--node-rank", "2", "--master-addr", "n1"};
  EXPECT_EQ(std::vector<std::string>(flags.begin(), flags.begin() + head.size()), head);
  EXPECT_NE(std::find(flags.begin(), flags.end(), "--stop-on-stdin-eof"), flags.end());
}

TEST(HostPlan, FlagsNarrowTheHostfileAsDeepSpeedsDo) {
  const std::string file = test::scratch_dir("hostplan") + "/hosts.txt";
  std::ofstream(file) << "n1 slots=8\nn2 slots=8\nn3 slots=8\n";
  const auto p = parse({"--hostfile", file, "--num_nodes", "2", "--num_gpus", "2", "--master_addr", "10.0.0.9",
                        "--master_port", "29700"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.plan.hosts.size(), 2u);
  EXPECT_EQ(p.launch.nnodes, 2);
  EXPECT_EQ(p.launch.nproc_per_node, 2);
  EXPECT_EQ(p.launch.master_addr, "10.0.0.9");
  EXPECT_EQ(p.launch.master_port, 29700);
  EXPECT_EQ(parse({"--hostfile", file}).launch.nproc_per_node, 8);
  EXPECT_EQ(parse({"--hostfile", file, "--nnodes", "4"}).error, "--nnodes 4 is more nodes than the 3 hosts listed");
  EXPECT_EQ(parse({"--hostfile", file, "--nproc-per-node", "9"}).error,
            "--nproc-per-node 9 is more ranks than n1 has (slots=8, " + file + ":1)");
  EXPECT_EQ(parse({"--hostfile", file, "--machine_rank", "1"}).error,
            "--node-rank: the host list gives each node its rank, in its order; leave it out");
  EXPECT_EQ(parse({"--hostfile", file, "--hosts", "a"}).error, "--hostfile and --hosts: give one of them");
}

TEST(HostPlan, AccelerateAndTorchrunSpellingsSetTheSameFields) {
  const auto p = parse({"--num_machines", "2", "--machine_rank", "1", "--main_process_ip", "10.0.0.1",
                        "--main_process_port", "29600", "--nproc_per_node", "3"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.launch.nnodes, 2);
  EXPECT_EQ(p.launch.node_rank, 1);
  EXPECT_EQ(p.launch.master_addr, "10.0.0.1");
  EXPECT_EQ(p.launch.master_port, 29600);
  EXPECT_EQ(p.launch.nproc_per_node, 3);
  EXPECT_EQ(parse({"--node_rank", "1"}).launch.node_rank, 1);
}

TEST(RemoteShell, SshInBatchModeOrTheGivenCommandWithTheHostFilledIn) {
  HostLaunchOptions o;
  o.ssh_port = 2222;
  o.ssh_opts = "-i key  -o ConnectTimeout=5";
  EXPECT_EQ(remote_shell_argv(o, "n1", "cmd"),
            (std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "-p", "2222", "-i", "key", "-o", "ConnectTimeout=5",
                                      "n1", "cmd"}));
  o.remote_shell = "srun --nodelist={host} -N1 sh -c";
  EXPECT_EQ(remote_shell_argv(o, "n1", "cmd"),
            (std::vector<std::string>{"srun", "--nodelist=n1", "-N1", "sh", "-c", "cmd"}));
}

// The remote command line survives a shell: every argument and variable arrives as it left.
TEST(RemoteCommand, ArgumentsAndVariablesArriveWhole) {
  const std::string line = remote_command_line({"sh", "-c", "printf '%s|' \"$X\" \"$@\"", "sh", "it's", "a b", "$HOME"},
                                               "/", {{"X", "x y'z"}});
  const auto r = test::run_process({"sh", "-c", line}, 10);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "x y'z|it's|a b|$HOME|");
}

TEST(RemoteCommand, ForwardsTheVariablesThatShapeARun) {
  setenv("DTRAIN_TEST_FORWARD", "1", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("SOME_OTHER_VARIABLE", "1", 1);
  std::map<std::string, std::string> env;
  for (const auto& [name, value] : forwarded_environment()) env[name] = value;
  EXPECT_EQ(env["DTRAIN_TEST_FORWARD"], "1");
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(env.count("PATH"), 1u);
  EXPECT_EQ(env.count("SOME_OTHER_VARIABLE"), 0u);
}

}  // namespace
}  // namespace dtrain

// A multi-node job started over real ssh: the test runs its own sshd on a free loopback port, with a
// throwaway host key and user key, and reaches this machine as two hosts ("localhost" and
// "127.0.0.1"). Skipped, with the reason, where no sshd can be started.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "launch/launch_test_cli.h"
#include "launch/multi_node_test_job.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

const char* kSshd = "/usr/sbin/sshd";

// An sshd for this test process alone, stopped (with its sessions) at the end.
class Sshd {
 public:
  // Returns why it cannot run here; empty once it listens.
  std::string start() {
    if (!fs::exists(kSshd)) return std::string(kSshd) + " is not installed (Debian: openssh-server)";
    if (!fs::exists("/usr/bin/ssh") || !fs::exists("/usr/bin/ssh-keygen"))
      return "ssh or ssh-keygen is not installed (Debian: openssh-client)";
    // sshd drops privileges into /run/sshd when root; without root it can log in only its own user.
    if (geteuid() == 0) fs::create_directories("/run/sshd");
    dir_ = scratch_dir("sshd");
    for (const char* key : {"host_key", "user_key"}) {
      const auto r = run_process({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir_ + "/" + key}, 30);
      if (r.exit_code != 0) return std::string("ssh-keygen failed: ") + r.output;
    }
    fs::copy_file(dir_ + "/user_key.pub", dir_ + "/authorized_keys");
    port_ = free_port();
    std::ofstream(dir_ + "/sshd_config") << "ListenAddress 127.0.0.1\n"
                                         << "HostKey " << dir_ << "/host_key\n"
                                         << "AuthorizedKeysFile " << dir_ << "/authorized_keys\n"
                                         << "PidFile " << dir_ << "/sshd.pid\n"
                                         << "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                                         << "PermitRootLogin prohibit-password\nLogLevel ERROR\n";
    const std::vector<std::string> argv{kSshd, "-D", "-e", "-f", dir_ + "/sshd_config", "-p", std::to_string(port_)};
    server_ = std::async(std::launch::async, [argv] { return run_process(argv, 170); });
    // sshd writes its pid file once it listens.
    const bool up = wait_for([&] { return pid() > 0 || server_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }, 30);
    if (!up || pid() <= 0) {
      const auto r = server_.wait_for(std::chrono::seconds(0)) == std::future_status::ready ? server_.get().output : "";
      return "sshd did not start: " + r;
    }
    const auto login = run_process(ssh_flags_for("true"), 30);
    if (login.exit_code != 0) return "cannot log in to the test's sshd: " + login.output;
    return "";
  }
  ~Sshd() {
    if (!server_.valid()) return;
    if (pid() > 0) ::kill(pid(), SIGTERM);
    server_.wait();
  }
  // The launcher's flags that reach this sshd.
  std::vector<std::string> launcher_flags() const {
    return {"--ssh-port", std::to_string(port_), "--ssh-opts", ssh_opts()};
  }

 private:
  int pid() const {
    int pid = 0;
    std::ifstream(dir_ + "/sshd.pid") >> pid;
    return pid;
  }
  std::string ssh_opts() const {
    return "-i " + dir_ + "/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR";
  }
  std::vector<std::string> ssh_flags_for(const std::string& command) const {
    std::vector<std::string> argv{"ssh", "-o", "BatchMode=yes", "-p", std::to_string(port_)};
    std::istringstream words(ssh_opts());
    for (std::string w; words >> w;) argv.push_back(w);
    argv.insert(argv.end(), {"127.0.0.1", command});
    return argv;
  }

  std::string dir_;
  int port_ = 0;
  std::future<ProcessResult> server_;
};

class SshLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto why = sshd_.start(); !why.empty()) GTEST_SKIP() << why;
  }
  // Two hosts, both this machine through the test's sshd, one rank each.
  std::vector<std::string> flags() const {
    std::vector<std::string> f{"--hosts", "localhost,127.0.0.1", "--nproc-per-node", "1", "--master-port",
                               std::to_string(free_port()), "--rdzv-timeout", "60"};
    for (auto& flag : sshd_.launcher_flags()) f.push_back(flag);
    return f;
  }
  Sshd sshd_;
};

TEST_F(SshLaunch, EachHostRunsItsNodeOverSsh) {
  const auto r = run_process(launch(flags(), {"sh", "-c", "echo rank $RANK of $WORLD_SIZE in $PWD, $DTRAIN_TEST_VALUE"}),
                             120, {"DTRAIN_TEST_VALUE=forwarded"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string here = fs::current_path().string();
  EXPECT_TRUE(contains(r.output, "[localhost] [rank 0] rank 0 of 2 in " + here + ", forwarded")) << r.output;
  EXPECT_TRUE(contains(r.output, "[127.0.0.1] [rank 1] rank 1 of 2 in " + here + ", forwarded")) << r.output;
}

TEST_F(SshLaunch, CtrlCLeavesNoProcessOnAnyHost) {
  const std::string marker = unique_marker("ssh_sigint");
  auto job = start_multi_node_job(marker, flags(), 2);
  ASSERT_GT(job.launcher, 0) << job.result.get().output;
  ::kill(job.launcher, SIGINT);
  const auto r = job.result.get();
  EXPECT_EQ(r.exit_code, 130) << r.output;
  EXPECT_TRUE(host_agent_stopped(r.output, "localhost", "dtrain launch")) << r.output;
  EXPECT_TRUE(host_agent_stopped(r.output, "127.0.0.1", "dtrain launch")) << r.output;
  expect_all_gone(job, marker);
}

// The launcher is gone without a word: ssh dies with it, sshd closes each session, and each agent
// reads the end of its standard input.
TEST_F(SshLaunch, AKilledLauncherLeavesNoProcessOnAnyHost) {
  const std::string marker = unique_marker("ssh_sigkill");
  auto job = start_multi_node_job(marker, flags(), 2);
  ASSERT_GT(job.launcher, 0) << job.result.get().output;
  ::kill(job.launcher, SIGKILL);
  EXPECT_EQ(job.result.get().signal, SIGKILL);
  expect_all_gone(job, marker);
}

}  // namespace
}  // namespace dtrain::test

#include "launch/remote_agents.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "launch/child_process.h"
#include "launch/output_lines.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDrainTime = std::chrono::seconds(5);

std::atomic<int> g_launcher_stop_signal{0};
void on_launcher_stop_signal(int sig) { g_launcher_stop_signal = sig; }

// One host's agent as the launcher sees it: the local process that reaches it (ssh), the write end
// of its standard input, and its output.
class AgentConnection {
 public:
  explicit AgentConnection(const RemoteAgent& agent) : host_(agent.host) {
    ChildSpec spec;
    spec.argv = agent.argv;
    spec.stdin_pipe = true;  // its end is how the host's agent learns the launcher is gone
    spec.who = "dtrain";
    // A group of its own: a Ctrl-C at the terminal reaches the launcher alone, which then stops every
    // host in order instead of each connection dying on its own.
    const StartedChild child = start_child(spec);
    pid_ = child.pid;
    stdin_fd_ = child.stdin_fd;
    out_fd_ = child.output_fd;
  }
  ~AgentConnection() {
    hang_up();
    if (!ended()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  const std::string& host() const { return host_; }
  int output_fd() const { return out_fd_; }
  bool pump_output() {
    const bool open = pump_lines(out_fd_, partial_, [this](const std::string& line) {
      std::printf("[%s] %s\n", host_.c_str(), line.c_str());
    });
    std::fflush(stdout);
    return open;
  }
  // Closes the agent's standard input: the agent stops its workers and ends.
  void hang_up() {
    if (stdin_fd_ >= 0) close(stdin_fd_);
    stdin_fd_ = -1;
  }
  void kill_connection() {
    if (!ended()) kill(pid_, SIGKILL);
  }
  bool ended() {
    if (pid_ > 0 && !reaped_ && waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    return reaped_;
  }
  int exit_code() const { return WIFSIGNALED(status_) ? 128 + WTERMSIG(status_) : WEXITSTATUS(status_); }
  std::string how_it_ended() const {
    if (!WIFSIGNALED(status_)) return "exit code " + std::to_string(WEXITSTATUS(status_));
    const char* name = sigabbrev_np(WTERMSIG(status_));
    return "signal " + std::to_string(WTERMSIG(status_)) + (name ? std::string(" (SIG") + name + ")" : "");
  }

 private:
  std::string host_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int out_fd_ = -1;
  std::string partial_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace

int run_remote_agents(const std::vector<RemoteAgent>& agents, const RemoteAgentsOptions& options) {
  struct sigaction sa {};
  sa.sa_handler = on_launcher_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
  auto say = [&](const std::string& line) { std::printf("%s: %s\n", options.who.c_str(), line.c_str()); };

  std::vector<std::unique_ptr<AgentConnection>> hosts;
  for (const auto& agent : agents) hosts.push_back(std::make_unique<AgentConnection>(agent));
  int exit_code = 0;
  bool stopping = false;
  Clock::time_point cut_off, drain_until = Clock::time_point::max();
  // The first host's agent holds the rendezvous store: it is stopped once the others have ended, so
  // that none of them loses the store while it still reports its stop through it.
  AgentConnection& store_host = *hosts.front();
  auto others_ended = [&] {
    for (size_t i = 1; i < hosts.size(); ++i)
      if (!hosts[i]->ended()) return false;
    return true;
  };
  auto stop_all = [&](const std::string& why) {
    if (stopping) return;
    say(why);
    for (size_t i = 1; i < hosts.size(); ++i) hosts[i]->hang_up();
    stopping = true;
    cut_off = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.stop_timeout_s * 1000));
  };
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& h : hosts)
      if (h->output_fd() >= 0) fds.push_back({h->output_fd(), POLLIN, 0});
    // Output is read until every host's pipe closes (an agent's watchdog holds it until it has cleaned
    // up), but not for ever after every agent has ended: something they started may hold it.
    bool all_ended = true;
    for (auto& h : hosts) all_ended = h->ended() && all_ended;
    if (all_ended && drain_until == Clock::time_point::max()) drain_until = Clock::now() + kDrainTime;
    if (all_ended && (fds.empty() || Clock::now() > drain_until)) break;
    poll(fds.data(), fds.size(), 50);
    for (auto& h : hosts) h->pump_output();
    if (const int sig = g_launcher_stop_signal.load(); sig && !stopping) {
      exit_code = 128 + sig;
      stop_all("stopped by signal " + std::to_string(sig) + "; stopping the agents on every host");
    }
    for (auto& h : hosts) {
      if (!h->ended() || h->exit_code() == 0 || exit_code != 0) continue;
      exit_code = h->exit_code();
      stop_all("host " + h->host() + "'s agent failed (" + h->how_it_ended() + "); stopping the agents on every host");
    }
    if (stopping && others_ended()) store_host.hang_up();
    if (stopping && Clock::now() > cut_off) {
      say("cutting the connections of the hosts whose agents have not ended after " +
          std::to_string(static_cast<int>(options.stop_timeout_s)) + "s");
      for (auto& h : hosts) h->kill_connection();
      cut_off = Clock::time_point::max();
    }
  }
  return exit_code;
}

}  // namespace dtrain

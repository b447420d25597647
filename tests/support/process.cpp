#include "support/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <sstream>
#include <stdexcept>

namespace dtrain::test {

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s,
                          const std::vector<std::string>& env) {
  int fds[2];
  // Close-on-exec: a process started at the same time from another thread must not inherit this
  // pipe's write end, or this one's output would not end until that process does.
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    // As from a login shell, whatever the test runner's own disposition: a runner that ignores
    // SIGPIPE would pass that on and hide every test of what a process does about it.
    signal(SIGPIPE, SIG_DFL);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  ProcessResult result;
  bool open = true;
  char buf[4096];
  while (open) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > timeout_s) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      ssize_t n = read(fds[0], buf, sizeof buf);
      if (n <= 0) open = false;
      else result.output.append(buf, n);
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<int> processes_with_markers(const std::vector<std::string>& markers) {
  std::vector<int> pids;
  DIR* dir = opendir("/proc");
  if (!dir) return pids;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos || std::stoi(name) == getpid()) continue;
    std::ifstream f("/proc/" + name + "/cmdline");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string cmd = ss.str();
    // Zombies have an empty cmdline; they are not running.
    bool all = !cmd.empty();
    for (const auto& m : markers) all = all && cmd.find(m) != std::string::npos;
    if (all) pids.push_back(std::stoi(name));
  }
  closedir(dir);
  return pids;
}

bool process_with_marker_alive(const std::string& marker) { return !processes_with_markers({marker}).empty(); }

namespace {
// The fields of /proc/<pid>/stat after the command name, from the state on ("S 1234 ..."); empty when
// there is no such process. The name is skipped up to its last ')', as it may hold spaces and parentheses.
std::string stat_from_state(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const auto name_end = stat.rfind(") ");
  return name_end == std::string::npos ? "" : stat.substr(name_end + 2);
}
}  // namespace

bool process_running(int pid) {
  const std::string stat = stat_from_state(pid);
  return !stat.empty() && stat[0] != 'Z' && stat[0] != 'X';
}

int parent_pid(int pid) {
  std::istringstream stat(stat_from_state(pid));
  char state = 0;
  int parent = 0;
  stat >> state >> parent;
  return parent;
}

bool wait_for(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace dtrain::test

namespace dtrain::test {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace dtrain::test

// Runs a command as a child process for multi-rank and CLI tests: captures its output and exit
// status and kills it (and its process group) if it outlives a deadline, so no test can hang.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace dtrain::test {

struct ProcessResult {
  int exit_code = -1;     // exit status, or -1 when killed by a signal
  int signal = 0;         // the signal that ended it, 0 if it exited
  bool timed_out = false; // the deadline passed and the test harness killed it
  double seconds = 0;     // wall time
  std::string output;     // stdout and stderr interleaved
};

// Runs `argv` with extra environment entries ("KEY=VALUE"), for at most `timeout_s` seconds.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s = 60,
                          const std::vector<std::string>& env = {});

// True if any process other than this one has `marker` in its command line.
bool process_with_marker_alive(const std::string& marker);
// The processes (other than this one) whose command line (arguments separated by '\0') contains
// every marker.
std::vector<int> processes_with_markers(const std::vector<std::string>& markers);

// Whether process `pid` exists and has not ended. A zombie has ended: an orphan that was killed lingers
// as one until init (or a subreaper) reaps it.
bool process_running(int pid);
// The parent of process `pid`, 0 when there is no such process.
int parent_pid(int pid);

// Polls `done` until it holds or `timeout_s` passes; returns whether it held. For waiting on a sign
// that something happened (a file appears, a process is gone), never for letting time pass.
bool wait_for(const std::function<bool()>& done, double timeout_s);

// A TCP port that is free on loopback right now, for tests that must name one up front.
int free_port();

// Whether `text` contains `needle`; on failure gtest prints the whole text.
inline bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

}  // namespace dtrain::test

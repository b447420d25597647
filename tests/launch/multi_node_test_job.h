// What the tests of a multi-node job started from one command share (through the remote-shell hook
// or a real sshd): a job of sleeping workers that says when every one runs, and the check that none
// of its processes is left on any host.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "launch/launch_test_cli.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {

struct MultiNodeJob {
  std::future<ProcessResult> result;
  int launcher = 0;   // the `dtrain launch` this test started; 0 if the workers did not all start
  std::string ready;  // each sleeper's pid, in a file named by its rank
};

// Starts `dtrain launch FLAGS -- sh -c '... worker_sleep 60 MARKER'` and returns once `workers`
// sleepers run on the hosts. The ready directory goes in the command line, not the environment, so it
// reaches hosts through ssh too.
inline MultiNodeJob start_multi_node_job(const std::string& marker, const std::vector<std::string>& flags, int workers) {
  MultiNodeJob job;
  job.ready = scratch_dir(marker + "_ready");
  const auto argv = launch(flags, {"sh", "-c", "WORKER_READY_DIR=" + job.ready + " exec " + kSleeper + " 60 " + marker});
  job.result = std::async(std::launch::async, [argv] { return run_process(argv, 120); });
  namespace fs = std::filesystem;
  const auto started = [&] {
    return std::count_if(fs::directory_iterator(job.ready), {},
                         [](const fs::directory_entry& e) { return e.path().extension() != ".tmp"; });
  };
  if (wait_for([&] { return started() == workers; }, 90)) job.launcher = launcher_pid(marker);
  return job;
}

// No process of the job is left: none carries its marker (the hosts' agents, their watchdogs, the
// workers), and no sleeper whose pid it wrote runs. Agents stop their workers at once, but a host's
// processes end after the launcher when it was killed: wait for that, never for a fixed time.
inline void expect_all_gone(const MultiNodeJob& job, const std::string& marker) {
  EXPECT_TRUE(wait_for([&] { return !process_with_marker_alive(marker); }, 60))
      << "left behind: " << processes_with_markers({marker}).size() << " processes carrying " << marker;
  for (const auto& e : std::filesystem::directory_iterator(job.ready)) {
    int pid = 0;
    std::ifstream(e.path()) >> pid;
    if (pid > 0) EXPECT_FALSE(process_running(pid)) << "worker pid " << pid << " (" << e.path() << ") outlived the job";
  }
  for (int pid : processes_with_markers({marker})) ::kill(pid, SIGKILL);
}

// What a host's agent says when the launcher stopped it: its own end of file on stdin (SIGHUP), or,
// when another host's agent stopped first and told the store, that.
inline bool host_agent_stopped(const std::string& output, const std::string& host, const std::string& who) {
  return contains(output, "[" + host + "] " + who + ": stopped by signal 1; workers terminated") ||
         contains(output, "[" + host + "] " + who + ": the job failed elsewhere: node");
}

}  // namespace dtrain::test

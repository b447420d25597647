// What the agent leaves in the job's run directory, so that a run that ended unwatched still says why:
//   launch-node<N>.log   every message the agent printed about the job's course, timestamped; appended
//                        to across rounds and across jobs run in the same directory
//   launch-node<N>.json  the verdict of the latest job on node N, as one object, replaced atomically
//                        (temporary file, fsync, rename)
// An elastic job's agents, whose node ranks change, name theirs launch-agent-<host>-<pid> instead.
// The agent never creates the run directory (a run that fails before its trainer made one leaves
// nothing on disk), and never writes into one that another run holds (ckpt/directory_lock.h): a run
// refused because its directory is in use leaves that directory as the running job has it. Until the
// directory is known, exists and is the job's, messages are kept, and written once it is.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace dtrain {

// Why one round of the job failed, as this node's agent saw it.
struct RoundFailure {
  std::string what;                     // one line: "rank 1 failed: exit code 3", or another node's report
  int rank = -1;                        // the failed global rank when it ran on this node, else -1
  std::string how;                      // that rank's end: "exit code 3", "signal 9 (SIGKILL)"
  std::vector<std::string> last_lines;  // what that rank printed last, oldest first
  bool restartable = true;              // false when a rank refused its input: a restart would be refused again
};

class LaunchReport {
 public:
  // `run_dir` may be empty: not known (yet). `wait_for_claim`: write nothing there until job_holds()
  // says the job's trainer holds it (what came before is written then).
  LaunchReport(std::string run_dir, int node_rank, bool wait_for_claim = false);

  bool knows_run_dir() const { return !run_dir_.empty(); }
  // An elastic agent's node rank changes from round to round: its files are named after the agent
  // (launch-agent-<host>-<pid>) and the verdict gives the rank of its last round.
  void name_after_agent(const std::string& host, int pid) { stem_ = "launch-agent-" + host + "-" + std::to_string(pid); }
  void set_node_rank(int node_rank) { node_rank_ = node_rank; }
  // An elastic job's membership changed before `round`: kept for the verdict's "membership" list.
  void record_membership(int round, int old_nodes, int new_nodes, int ranks_per_node);
  void set_run_dir(const std::string& run_dir) { run_dir_ = run_dir; }
  // This job's trainer published `run_dir` as its own: its rank 0 holds the directory's lock, so the
  // lock is no sign of another run there.
  void job_holds(const std::string& run_dir);

  // Adds one of the agent's messages, as printed, to the log, and flushes. Never throws: a report
  // that cannot be written is a warning on stderr, never a change to how the agent ends.
  void record(const std::string& message);
  // Appends the messages not written yet, once the run directory may be written. The first write of
  // a job also sets the verdict to "running", so that an earlier job's verdict never stands for this
  // one. Cheap when there is nothing to write; never throws.
  void flush();
  // The job is over: adds `reason`, the agent's last message, to the log and writes the verdict.
  // `outcome` is "succeeded", "failed" (restarts spent), "stopped" (by a signal) or "error"
  // (rendezvous or store); `failure` is what ended the last round, if anything did. Never throws.
  // Returns a line for the console saying where the report is, or why there is none; empty when no
  // run directory is known or writing failed (which was warned about).
  std::string finish(const std::string& outcome, int exit_code, int round, const std::string& reason,
                     const RoundFailure* failure);

 private:
  std::string path(const std::string& extension) const;
  // Empty when the run directory may be written now; otherwise why not: it is unknown, does not exist,
  // or another run holds it.
  std::string why_not_writable() const;
  void add_entry(const std::string& message);
  // Each writes its file; false (after a warning) when it could not.
  bool append_log();
  bool write_verdict(const nlohmann::json& verdict);

  std::string run_dir_;
  int node_rank_;
  std::string stem_;  // the files' name without extension
  bool wait_for_claim_;
  bool job_holds_run_dir_ = false;
  std::string unwritten_;    // this job's log entries that are not in the file yet
  bool new_entries_ = false; // entries came since the last attempt to write (a failed one is not repeated for nothing)
  bool started_ = false;     // this job has set the verdict to "running"
  std::vector<nlohmann::json> membership_;  // record_membership's entries, oldest first
};

}  // namespace dtrain

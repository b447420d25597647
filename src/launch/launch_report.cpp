#include "launch/launch_report.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <iostream>

#include "ckpt/directory_lock.h"
#include "ckpt/durable_file.h"
#include "ckpt/log_file.h"

namespace dtrain {
namespace {

// UTC, so that the reports of a job's nodes read on one clock.
std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void warn(const std::string& what) {
  std::cerr << "dtrain launch: warning: cannot write the launch report: " << what << std::endl;
}

}  // namespace

LaunchReport::LaunchReport(std::string run_dir, int node_rank, bool wait_for_claim)
    : run_dir_(std::move(run_dir)),
      node_rank_(node_rank),
      stem_("launch-node" + std::to_string(node_rank)),
      wait_for_claim_(wait_for_claim) {}

std::string LaunchReport::path(const std::string& extension) const {
  return run_dir_ + "/" + stem_ + extension;
}

void LaunchReport::job_holds(const std::string& run_dir) {
  std::error_code ignored;  // "runs/a" and "./runs/a" are one directory
  if (run_dir == run_dir_ || std::filesystem::equivalent(run_dir, run_dir_, ignored)) job_holds_run_dir_ = true;
}

void LaunchReport::record_membership(int round, int old_nodes, int new_nodes, int ranks_per_node) {
  membership_.push_back({{"round", round},
                         {"old_nodes", old_nodes},
                         {"new_nodes", new_nodes},
                         {"old_world", old_nodes * ranks_per_node},
                         {"new_world", new_nodes * ranks_per_node},
                         {"time", utc_now()}});
}

std::string LaunchReport::why_not_writable() const {
  if (!knows_run_dir()) return "no run directory is known";
  std::error_code ignored;
  if (!std::filesystem::is_directory(run_dir_, ignored)) return "the run directory " + run_dir_ + " does not exist";
  if (job_holds_run_dir_) return "";
  // Held, and not by this job's trainer: another run's directory, which this one must leave alone.
  if (const auto holder = DirectoryLock::holder(run_dir_)) return "the run directory " + run_dir_ + " is in use by " + *holder;
  if (wait_for_claim_) return "this job's trainer did not take the run directory " + run_dir_;
  return "";
}

void LaunchReport::add_entry(const std::string& message) {
  unwritten_ += utc_now() + " " + message + "\n";
  new_entries_ = true;
}

void LaunchReport::record(const std::string& message) {
  add_entry(message);
  flush();
}

void LaunchReport::flush() {
  if (!new_entries_ || !why_not_writable().empty()) return;
  new_entries_ = false;  // a failed write is warned about once, and tried again with the next entry
  append_log();
  // The verdict comes second, so whoever sees "running" finds the history it speaks of beside it.
  if (!started_) {
    started_ = true;
    // "running" with no agent left alive: the agent was killed before it could say more.
    write_verdict({{"outcome", "running"}, {"node_rank", node_rank_}, {"time", utc_now()}});
  }
}

bool LaunchReport::append_log() {
  if (unwritten_.empty()) return true;
  try {
    // Appended, never rewritten: what earlier rounds and jobs wrote there stays whatever this one does.
    LogFile log;
    log.open(path(".log"));
    log.append(unwritten_);
    unwritten_.clear();
    return true;
  } catch (const std::exception& e) {
    warn(e.what());
    return false;
  }
}

bool LaunchReport::write_verdict(const nlohmann::json& verdict) {
  try {
    write_file_atomically(path(".json"), verdict.dump(2) + "\n");
    return true;
  } catch (const std::exception& e) {
    warn(e.what());
    return false;
  }
}

std::string LaunchReport::finish(const std::string& outcome, int exit_code, int round, const std::string& reason,
                                 const RoundFailure* failure) {
  add_entry(reason);
  if (!knows_run_dir()) return "";
  if (const std::string why = why_not_writable(); !why.empty()) return "no launch report: " + why;
  nlohmann::json verdict = {{"outcome", outcome}, {"exit_code", exit_code}, {"reason", reason},
                            {"round", round},     {"node_rank", node_rank_}, {"time", utc_now()}};
  if (!membership_.empty()) verdict["membership"] = membership_;
  if (failure) {
    verdict["failure"] = {{"what", failure->what}};
    if (failure->rank >= 0) {
      verdict["failure"]["rank"] = failure->rank;
      verdict["failure"]["how"] = failure->how;
      verdict["failure"]["last_lines"] = failure->last_lines;
    }
  }
  const bool log_written = append_log();
  const bool verdict_written = write_verdict(verdict);
  if (!log_written || !verdict_written) return "";
  return "why the job ended: " + path(".log") + " (history), " + path(".json") + " (verdict)";
}

}  // namespace dtrain

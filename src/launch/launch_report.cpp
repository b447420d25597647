#include "launch/launch_report.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <iostream>

#include "ckpt/durable_file.h"

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

LaunchReport::LaunchReport(std::string run_dir, int node_rank) : run_dir_(std::move(run_dir)), node_rank_(node_rank) {}

std::string LaunchReport::path(const std::string& extension) const {
  return run_dir_ + "/launch-node" + std::to_string(node_rank_) + extension;
}

bool LaunchReport::run_dir_exists() const {
  std::error_code ignored;
  return knows_run_dir() && std::filesystem::is_directory(run_dir_, ignored);
}

void LaunchReport::add_entry(const std::string& message) {
  history_ += utc_now() + " " + message + "\n";
  unwritten_ = true;
}

void LaunchReport::record(const std::string& message) {
  add_entry(message);
  flush();
}

void LaunchReport::flush() {
  if (!unwritten_ || !run_dir_exists()) return;
  unwritten_ = false;  // a failed write is warned about once, and tried again with the next entry
  write_log();
  // The verdict comes second, so whoever sees "running" finds the history it speaks of beside it.
  if (!started_) {
    started_ = true;
    // "running" with no agent left alive: the agent was killed before it could say more.
    write_verdict({{"outcome", "running"}, {"node_rank", node_rank_}, {"time", utc_now()}});
  }
}

bool LaunchReport::write_log() {
  try {
    if (!earlier_read_) {
      earlier_ = std::filesystem::exists(path(".log")) ? read_text_file(path(".log")) : "";
      earlier_read_ = true;
    }
    write_file_atomically(path(".log"), earlier_ + history_);
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
  if (!run_dir_exists()) return "no launch report: the run directory " + run_dir_ + " does not exist";
  nlohmann::json verdict = {{"outcome", outcome}, {"exit_code", exit_code}, {"reason", reason},
                            {"round", round},     {"node_rank", node_rank_}, {"time", utc_now()}};
  if (failure) {
    verdict["failure"] = {{"what", failure->what}};
    if (failure->rank >= 0) {
      verdict["failure"]["rank"] = failure->rank;
      verdict["failure"]["how"] = failure->how;
      verdict["failure"]["last_lines"] = failure->last_lines;
    }
  }
  const bool log_written = write_log();
  const bool verdict_written = write_verdict(verdict);
  if (!log_written || !verdict_written) return "";
  return "why the job ended: " + path(".log") + " (history), " + path(".json") + " (verdict)";
}

}  // namespace dtrain

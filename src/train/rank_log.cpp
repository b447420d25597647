#include "train/rank_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

namespace dtrain {
namespace {
std::string timestamp() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}
}  // namespace

void RankLog::open(const std::string& run_dir) { file_.open(run_dir + "/rank-" + std::to_string(rank_) + ".log"); }

void RankLog::write(const std::string& line) {
  if (!file_.is_open()) return;
  try {
    file_.append(timestamp() + " " + line + "\n");
  } catch (...) {
    file_.close();  // so the fatal line of the error this raises is not tried on it again
    throw;
  }
}

void RankLog::info(const std::string& line) {
  if (to_stdout_) std::cout << line << std::endl;
  write(line);
}

void RankLog::warn(const std::string& line) {
  std::cerr << "rank " << rank_ << ": warning: " << line << std::endl;
  write("WARNING " + line);
}

void RankLog::error(const std::string& line) {
  if (to_stdout_) std::cerr << "error: " << line << std::endl;
  fatal(line);
}

void RankLog::fatal(const std::string& line) {
  try {
    write("ERROR " + line);
  } catch (const std::exception& e) {  // the error itself reaches the console through the command
    std::cerr << "rank " << rank_ << ": warning: " << e.what() << "; the rank's log lacks its last error" << std::endl;
  }
}

std::string format_duration(double seconds) {
  const long s = seconds < 0 ? 0 : static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

}  // namespace dtrain

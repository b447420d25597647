#include "train/rank_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <stdexcept>

namespace dtrain {
namespace {
std::string timestamp() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}
}  // namespace

void RankLog::open(const std::string& run_dir) {
  const std::string path = run_dir + "/rank-" + std::to_string(rank_) + ".log";
  file_.open(path, std::ios::app);
  if (!file_) throw std::runtime_error("cannot open log file " + path + " for writing");
}

void RankLog::info(const std::string& line) {
  if (file_.is_open()) file_ << timestamp() << " " << line << std::endl;
  if (to_stdout_) std::cout << line << std::endl;
}

void RankLog::warn(const std::string& line) {
  if (file_.is_open()) file_ << timestamp() << " WARNING " << line << std::endl;
  std::cerr << "rank " << rank_ << ": warning: " << line << std::endl;
}

void RankLog::error(const std::string& line) {
  fatal(line);
  if (to_stdout_) std::cerr << "error: " << line << std::endl;
}

void RankLog::fatal(const std::string& line) {
  if (file_.is_open()) file_ << timestamp() << " ERROR " << line << std::endl;
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

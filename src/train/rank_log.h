// Each rank's log: `<run_dir>/rank-<r>.log`, with rank 0 also printing to stdout (which the launcher
// forwards), so a failed rank's story is on disk even when only rank 0 speaks on the console.
#pragma once
#include <fstream>
#include <string>

namespace dtrain {

class RankLog {
 public:
  RankLog(int rank, bool to_stdout) : rank_(rank), to_stdout_(to_stdout) {}
  // Starts writing to `<run_dir>/rank-<r>.log` (appending, so a restarted run keeps its history).
  void open(const std::string& run_dir);
  // One timestamped line to the file, and to stdout on the console rank.
  void info(const std::string& line);
  // Like info, but always also to stderr: warnings every rank must be able to raise.
  void warn(const std::string& line);
  // Why the run stops: to the file, and to stderr on the console rank (every rank reaches it).
  void error(const std::string& line);
  // A fatal error the command itself reports on the console: to the file only, so the rank's log
  // says why it died.
  void fatal(const std::string& line);

 private:
  int rank_;
  bool to_stdout_;
  std::ofstream file_;
};

// "1h02m", "3m05s", "42s": for ETAs and elapsed times.
std::string format_duration(double seconds);

}  // namespace dtrain

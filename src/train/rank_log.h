// Each rank's log: `<run_dir>/rank-<r>.log`, with rank 0 also printing to stdout (which the launcher
// forwards), so a failed rank's story is on disk even when only rank 0 speaks on the console. A line
// goes to the console before the file, and a line the file cannot take (a full disk) throws naming
// the file: the rank stops rather than run on with a log that ends early.
#pragma once
#include <string>

#include "ckpt/log_file.h"

namespace dtrain {

class RankLog {
 public:
  RankLog(int rank, bool to_stdout) : rank_(rank), to_stdout_(to_stdout) {}
  // Starts writing to `<run_dir>/rank-<r>.log` (appending, so a restarted run keeps its history);
  // throws naming the file.
  void open(const std::string& run_dir);
  // One timestamped line to the file, and to stdout on the console rank.
  void info(const std::string& line);
  // Like info, but always also to stderr: warnings every rank must be able to raise.
  void warn(const std::string& line);
  // Why the run stops: to the file, and to stderr on the console rank (every rank reaches it).
  void error(const std::string& line);
  // A fatal error the command itself reports on the console: to the file only, so the rank's log
  // says why it died. Never throws: a file that cannot take the line gets a warning on stderr.
  void fatal(const std::string& line);

 private:
  void write(const std::string& line);  // a timestamped line to the file, when it is open

  int rank_;
  bool to_stdout_;
  LogFile file_;
};

// "1h02m", "3m05s", "42s": for ETAs and elapsed times.
std::string format_duration(double seconds);

}  // namespace dtrain

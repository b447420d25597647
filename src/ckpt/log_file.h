// A log written line by line (rank logs, metrics.jsonl). Each line reaches the kernel in one write
// as it is appended, so a crash loses nothing logged; a write that fails or falls short (a full
// disk) throws naming the path, after cutting the file back to its last whole line, so a full run
// directory stops the run instead of leaving a log that silently ends mid-line.
#pragma once
#include <string>

namespace dtrain {

class LogFile {
 public:
  LogFile() = default;
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Opens `path` for appending, creating it; throws naming the path.
  void open(const std::string& path);
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Appends `text` (whole lines); throws "cannot write '<path>': <reason>" when it does not all fit.
  void append(const std::string& text);
  void close();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace dtrain
